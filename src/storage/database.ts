import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MagpieError } from '../common/errors.js';
import { storageError } from './storage-error.js';

import { SerialClient } from './serial-client.js';
import { applyWriterPragmas } from './sqlite-pragmas.js';
import type { SqlClient } from './sql-client.js';
import type { SqlDatabase } from './sql-database.js';

export type { SqlClient } from './sql-client.js';

/**
 * A named schema step. Names are unique across the project (`memory-001-init`,
 * `history-001-init`, ...); each concept owns its own list, and a step, once shipped, is never
 * edited: a change is a new step.
 */
export interface Migration {
  name: string;
  /** The step on SQLite. */
  up(db: SqlClient): Promise<void>;
  /** The same step on PostgreSQL: SQL run as one script inside the step's transaction. */
  postgres?: string;
  /** Rows the PostgreSQL step rewrites with code, after its SQL, in the same transaction. */
  postgresData?(db: SqlClient): Promise<void>;
}

export const DATABASE_FILE = 'magpie.sqlite';

/**
 * Told when a store's schema steps begin (with the steps about to run) and when they have all
 * run: a large store's upgrade may take minutes, and an operator should see why a start waits.
 * Never called when nothing is pending.
 */
export type SchemaStepListener = (report: { phase: 'started'; steps: string[] } | { phase: 'finished'; steps: string[]; durationMs: number }) => void;

/** Runs `apply` for each pending migration, telling `listener` before the first and after the last. */
export async function runPendingSteps(
  pending: readonly Migration[],
  apply: (migration: Migration) => Promise<void>,
  listener: SchemaStepListener | undefined,
): Promise<void> {
  if (pending.length === 0) return;
  const steps = pending.map((migration) => migration.name);
  const started = performance.now();
  listener?.({ phase: 'started', steps });
  for (const migration of pending) await apply(migration);
  listener?.({ phase: 'finished', steps, durationMs: Math.round(performance.now() - started) });
}

/**
 * Opens (creating if needed) the one SQLite database of a data directory, in WAL mode, and
 * applies every migration not yet applied, each in its own transaction. With `readOnly`, the
 * database must exist and is opened read-only (beside a running writer, or on a read-only disk):
 * nothing is created or migrated, and a database that needs a migration is refused.
 */
export async function openDatabase(
  dataDir: string,
  migrations: readonly Migration[],
  options: { readOnly?: boolean; onSchemaStep?: SchemaStepListener } = {},
): Promise<SqlClient> {
  if (options.readOnly) return new SerialClient(openReadOnly(dataDir, migrations));
  let db: SqlDatabase;
  try {
    mkdirSync(dataDir, { recursive: true });
    db = new Database(join(dataDir, DATABASE_FILE));
  } catch (error) {
    throw unusableDataDir(dataDir, error);
  }
  try {
    // Set first: two processes opening a fresh data dir at once wait for each other's
    // journal switch and migrations instead of failing with "database is locked".
    db.pragma('busy_timeout = 5000');
    await switchToWal(db);
  } catch (error) {
    db.close();
    throw unusableDataDir(dataDir, error);
  }
  applyWriterPragmas(db);
  const client = new SerialClient(db);
  try {
    await applyMigrations(client, migrations, options.onSchemaStep);
  } catch (error) {
    await client.close();
    throw error;
  }
  return client;
}

/**
 * Closes a writer's database leaving it in rollback-journal mode, so that a reader can open it
 * later even on a read-only disk (a WAL database needs its -shm file, which a read-only
 * directory cannot create). When a reader is still open the switch waits for no one: the file
 * stays in WAL mode, with its -wal and -shm files, which read-only readers can use as well.
 */
export async function closeDatabase(db: SqlClient): Promise<void> {
  if (!db.open) return;
  if (db.dialect === 'sqlite') {
    // Its connection would keep the file in WAL mode.
    if (db instanceof SerialClient) await db.stopWriterThread();
    try {
      await db.pragma('busy_timeout = 0');
      await db.pragma('journal_mode = DELETE');
    } catch {
      // Another connection is open: see above.
    }
  }
  await db.close();
}

function openReadOnly(dataDir: string, migrations: readonly Migration[]): SqlDatabase {
  const file = join(dataDir, DATABASE_FILE);
  if (!existsSync(file)) {
    throw new MagpieError('no_data', `no Magpie data in ${dataDir} (${DATABASE_FILE} not found)`, {
      context: { dataDir },
      hint: 'pass --data-dir with a directory written by `magpie start`, `magpie chat` or `magpie replay`',
    });
  }
  let db: SqlDatabase;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true, timeout: 5000 });
    db.pragma('query_only = ON');
    const applied = new Set(
      (db.prepare('SELECT name FROM schema_migrations').all() as { name: string }[]).map((row) => row.name),
    );
    const missing = migrations.filter((migration) => !applied.has(migration.name));
    if (missing.length > 0) {
      db.close();
      throw new MagpieError('data_dir_outdated', `the database in ${dataDir} was written by an older Magpie`, {
        context: { dataDir, missing: missing.map((migration) => migration.name) },
        hint: 'run a writing command once (magpie start, chat or replay) to upgrade it, then read it again',
      });
    }
  } catch (error) {
    if (error instanceof MagpieError) throw error;
    throw unusableDataDir(dataDir, error, 'read');
  }
  return db;
}

/**
 * Makes sure a data dir exists and takes files (on PostgreSQL it still holds the index files),
 * or says which directory is unusable and what to do, as opening its database would.
 */
export function ensureDataDir(dataDir: string): void {
  try {
    mkdirSync(dataDir, { recursive: true });
    accessSync(dataDir, constants.W_OK);
  } catch (error) {
    throw unusableDataDir(dataDir, error);
  }
}

/** A data dir that is a file, not writable, or on a read-only disk: say which and what to do. */
function unusableDataDir(dataDir: string, cause: unknown, mode: 'read' | 'write' = 'write'): MagpieError {
  // A damaged database (or garbage in magpie.sqlite) is not a permissions problem.
  const damaged = storageError(dataDir, cause);
  if (damaged?.code === 'storage_corrupt') return damaged;
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new MagpieError('data_dir_unusable', `cannot open the data directory ${dataDir}: ${reason}`, {
    cause,
    context: { dataDir },
    hint:
      mode === 'write'
        ? 'point --data-dir, MAGPIE_DATA_DIR or [memory] data_dir at a directory this user can write'
        : 'check that this user can read the directory and its magpie.sqlite file',
  });
}

/**
 * Refuses a store a newer Magpie has migrated: steps recorded that this build does not know mean
 * tables or columns it would write without knowing what they hold, so it writes nothing.
 */
export function refuseNewerSteps(applied: ReadonlySet<string>, migrations: readonly Migration[], where: string): void {
  const known = new Set(migrations.map((migration) => migration.name));
  const unknown = [...applied].filter((name) => !known.has(name)).sort();
  if (unknown.length === 0) return;
  throw new MagpieError('store_from_newer_version', `${where} was migrated by a newer Magpie: it records schema steps this build does not know (${unknown.join(', ')})`, {
    context: { steps: unknown },
    hint: 'run the Magpie version that wrote it (or a newer one), or restore a backup made with this version',
  });
}

/**
 * Applies the migrations not yet applied. Each runs in a BEGIN IMMEDIATE transaction that first
 * re-checks whether another process applied it meanwhile, so two processes migrating a fresh
 * data dir at once take turns (busy_timeout) instead of failing on "table already exists".
 */
export async function applyMigrations(db: SqlClient, migrations: readonly Migration[], onSchemaStep?: SchemaStepListener): Promise<void> {
  await db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  const applied = new Set(
    ((await db.prepare('SELECT name FROM schema_migrations').all()) as { name: string }[]).map((row) => row.name),
  );
  refuseNewerSteps(applied, migrations, 'this data dir');
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE name = ?');
  const record = db.prepare('INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)');
  const pending = migrations.filter((migration) => !applied.has(migration.name));
  await runPendingSteps(
    pending,
    (migration) =>
      db.transaction(async () => {
        if (await isApplied.get(migration.name)) return;
        await migration.up(db);
        await record.run(migration.name, Date.now());
      }, 'immediate'),
    onSchemaStep,
  );
}

/**
 * Switches a connection to WAL. The switch can answer "database is locked" at once, without
 * waiting out busy_timeout, while another process is switching or migrating the same fresh file:
 * it is tried again for up to five seconds, waiting on a timer, never on the event loop.
 */
async function switchToWal(db: SqlDatabase): Promise<void> {
  const deadline = Date.now() + 5_000;
  for (let attempt = 1; ; attempt += 1) {
    try {
      db.pragma('journal_mode = WAL');
      return;
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (!code.startsWith('SQLITE_BUSY') && !code.startsWith('SQLITE_LOCKED')) throw error;
      if (Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(100, 10 * attempt)));
    }
  }
}
