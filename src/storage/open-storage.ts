import { InputError, MagpieError } from '../common/errors.js';
import type { MagpieConfig } from '../config/types.js';
import { openDataDirForWriting } from './data-dir.js';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { closeDatabase, DATABASE_FILE, ensureDataDir, openDatabase, type Migration } from './database.js';
import { PgDatabase, redactUrl } from './postgres/pg-database.js';
import { applyPgMigrations, missingPgMigrations } from './postgres/pg-migrations.js';
import { acquirePgWriterLock, STORAGE_WRITERS_TABLE } from './postgres/pg-writer-lock.js';
import { openDatabaseReadOnly } from './read-only.js';
import { SerialClient } from './serial-client.js';
import type { SqlClient } from './sql-client.js';
import { listDataDirs } from './shard-dirs.js';

/** Where a process keeps its data: the data dir alone (SQLite), or PostgreSQL plus the data dir for index files. */
export type StorageTarget =
  | { backend: 'sqlite'; dataDir: string }
  | { backend: 'postgres'; dataDir: string; url: string; schema: string };

/** An open store and what closes it (the database, then the writer lock). */
export interface OpenedStorage {
  target: StorageTarget;
  dataDir: string;
  db: SqlClient;
  close(): Promise<void>;
}

/** The target `[storage]` names; PostgreSQL needs its URL in the environment variable `url_env` names. */
export function storageTarget(config: Pick<MagpieConfig, 'storage'>, dataDir: string, env: NodeJS.ProcessEnv = process.env): StorageTarget {
  const storage = config.storage;
  if (storage.backend === 'sqlite') return { backend: 'sqlite', dataDir };
  const url = env[storage.urlEnv]?.trim();
  if (!url) {
    throw new InputError(`[storage] backend = "postgres" needs a connection URL in ${storage.urlEnv}, which is not set`, {
      context: { key: 'storage.url_env' },
      hint: `export ${storage.urlEnv}=postgres://user@host:5432/database (or name another variable in [storage] url_env)`,
    });
  }
  return { backend: 'postgres', dataDir, url, schema: storage.schema };
}

/** Where the data is, for messages and logs (no password). */
export function describeTarget(target: StorageTarget): string {
  return target.backend === 'sqlite' ? target.dataDir : `${redactUrl(target.url)} (schema ${target.schema})`;
}

/**
 * Opens the store for its one writer. SQLite: the data dir's writer lock, then the database.
 * PostgreSQL: the schema is migrated, then an advisory lock per `writerKey` (one per shard) is
 * taken on the writer's connection, so two processes never write the same channels.
 */
export async function openStorageForWriting(
  target: StorageTarget,
  migrations: readonly Migration[],
  options: { command: string; writerKey?: string },
): Promise<OpenedStorage> {
  if (target.backend === 'sqlite') {
    const writable = await openDataDirForWriting(target.dataDir, migrations, { command: options.command });
    return { target, dataDir: target.dataDir, db: writable.db, close: () => writable.close() };
  }
  ensureDataDir(target.dataDir);
  const db = connect(target, options.command);
  try {
    await db.exec(STORAGE_WRITERS_TABLE);
    await applyPgMigrations(db, migrations);
    const lock = await acquirePgWriterLock(db, { key: options.writerKey ?? 'all', command: options.command, schema: target.schema });
    return {
      target,
      dataDir: target.dataDir,
      db,
      async close() {
        try {
          await lock.release();
        } finally {
          await db.close();
        }
      },
    };
  } catch (error) {
    await db.close();
    throw error;
  }
}

/**
 * Opens the store to read beside a running writer: nothing is created, migrated or locked.
 * `anyVersion` accepts a store an older Magpie wrote (status and report check for the tables they
 * read); otherwise a store missing a schema step is refused.
 */
export async function openStorageForReading(
  target: StorageTarget,
  migrations: readonly Migration[],
  options: { command?: string; anyVersion?: boolean } = {},
): Promise<OpenedStorage> {
  if (target.backend === 'sqlite') {
    const db = options.anyVersion ? openDatabaseReadOnly(target.dataDir) : await openDatabase(target.dataDir, migrations, { readOnly: true });
    return { target, dataDir: target.dataDir, db, close: () => closeDatabase(db) };
  }
  const db = connect(target, options.command ?? 'magpie reader');
  let missing: string[];
  try {
    missing = await missingPgMigrations(db, migrations);
  } catch (error) {
    await db.close();
    throw error;
  }
  if (missing.length === migrations.length || (missing.length > 0 && !options.anyVersion)) {
    await db.close();
    const empty = missing.length === migrations.length;
    const what = `${empty ? `no Magpie data in ${target.dataDir}: ` : ''}no complete Magpie schema in ${describeTarget(target)}`;
    throw new MagpieError(empty ? 'no_data' : 'data_dir_outdated', what, {
      context: { schema: target.schema, missing },
      hint: 'run a writing command (magpie start, chat or replay) against this database first',
    });
  }
  await db.exec('SET default_transaction_read_only = on');
  return { target, dataDir: target.dataDir, db, close: () => db.close() };
}

/**
 * Opens the store beside its running writer, to leave it a request (an erasure) in a table the
 * writer reads: no writer lock, no migration (the writer's schema is what it is).
 */
export async function openStorageBesideWriter(target: StorageTarget, command: string): Promise<OpenedStorage> {
  if (target.backend === 'postgres') {
    const db = connect(target, command);
    return { target, dataDir: target.dataDir, db, close: () => db.close() };
  }
  const connection = new Database(join(target.dataDir, DATABASE_FILE), { fileMustExist: true });
  connection.pragma('busy_timeout = 5000');
  const db = new SerialClient(connection);
  return { target, dataDir: target.dataDir, db, close: () => db.close() };
}

/** A client on the schema of `target` (for now over the connection-thread bridge). */
function connect(target: Extract<StorageTarget, { backend: 'postgres' }>, command: string): SqlClient {
  return new SerialClient(
    new PgDatabase({ url: target.url, schema: target.schema, applicationName: command.slice(0, 60), statementTimeoutMs: 60_000 }),
    'postgres',
  );
}

/** One store of a deployment: the data dir (or a shard's) on SQLite; the one schema on PostgreSQL. */
export interface StorageEntry {
  dir: string;
  shardId?: number;
  target: StorageTarget;
}

/**
 * Every store a reader looks across. SQLite: the data dir and its `shard-<N>` dirs that hold a
 * database (empty when there is none). PostgreSQL: the one schema every shard shares.
 */
export function listStorage(config: Pick<MagpieConfig, 'storage'>, dataDir: string, env: NodeJS.ProcessEnv = process.env): StorageEntry[] {
  const target = storageTarget(config, dataDir, env);
  if (target.backend === 'postgres') return [{ dir: dataDir, target }];
  return listDataDirs(dataDir).map((entry) => ({ ...entry, target: { backend: 'sqlite', dataDir: entry.dir } }));
}
