import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MagpieError } from '../common/errors.js';

export type SqliteDatabase = Database.Database;

/**
 * A named schema step. Names are unique across the project (`memory-001-init`,
 * `history-001-init`, ...); each concept owns its own list, and a step, once shipped, is never
 * edited: a change is a new step.
 */
export interface Migration {
  name: string;
  up(db: SqliteDatabase): void;
}

export const DATABASE_FILE = 'magpie.sqlite';

/**
 * Opens (creating if needed) the one SQLite database of a data directory, in WAL mode, and
 * applies every migration not yet applied, each in its own transaction.
 */
export function openDatabase(dataDir: string, migrations: readonly Migration[]): SqliteDatabase {
  let db: SqliteDatabase;
  try {
    mkdirSync(dataDir, { recursive: true });
    db = new Database(join(dataDir, DATABASE_FILE));
  } catch (error) {
    throw unusableDataDir(dataDir, error);
  }
  try {
    db.pragma('journal_mode = WAL');
  } catch (error) {
    db.close();
    throw unusableDataDir(dataDir, error);
  }
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  // Deleted text is overwritten with zeros rather than left in free pages of the file.
  db.pragma('secure_delete = ON');
  applyMigrations(db, migrations);
  return db;
}

/** A data dir that is a file, not writable, or on a read-only disk: say which and what to do. */
function unusableDataDir(dataDir: string, cause: unknown): MagpieError {
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new MagpieError('data_dir_unusable', `cannot open the data directory ${dataDir}: ${reason}`, {
    cause,
    context: { dataDir },
    hint: 'point --data-dir, MAGPIE_DATA_DIR or [memory] data_dir at a directory this user can write',
  });
}

export function applyMigrations(db: SqliteDatabase, migrations: readonly Migration[]): void {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)',
  );
  const applied = new Set(
    (db.prepare('SELECT name FROM schema_migrations').all() as { name: string }[]).map((row) => row.name),
  );
  const record = db.prepare('INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)');
  for (const migration of migrations) {
    if (applied.has(migration.name)) continue;
    db.transaction(() => {
      migration.up(db);
      record.run(migration.name, Date.now());
    })();
  }
}
