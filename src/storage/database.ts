import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

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
  mkdirSync(dataDir, { recursive: true });
  const db = new Database(join(dataDir, DATABASE_FILE));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  applyMigrations(db, migrations);
  return db;
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
