import { mkdirSync } from 'node:fs';
import { closeDatabase, openDatabase, type Migration } from './database.js';
import type { SqlClient } from './sql-client.js';
import { WriterLock } from './writer-lock.js';

/** A data dir opened by its one writer: the lock is held until `close`. */
export interface WritableDataDir {
  dataDir: string;
  db: SqlClient;
  lock: WriterLock;
  /** Closes the database, then releases the lock. */
  close(): Promise<void>;
}

/**
 * Opens a data dir for writing: takes the writer lock first (a second writer is refused at once,
 * naming the holder), then opens and migrates the database. Writers are `start`, `chat`,
 * `replay` and `memory forget`; readers use `openDatabase(dir, migrations, { readOnly: true })`.
 */
export async function openDataDirForWriting(
  dataDir: string,
  migrations: readonly Migration[],
  options: { command: string },
): Promise<WritableDataDir> {
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch {
    // openDatabase reports an unusable data dir with the reason and what to do.
  }
  let lock: WriterLock;
  try {
    lock = WriterLock.acquire(dataDir, options);
  } catch (error) {
    if ((error as { code?: string }).code === 'data_dir_locked') throw error;
    // Cannot even create the lock file: let openDatabase explain why the dir is unusable.
    await (await openDatabase(dataDir, migrations)).close();
    throw error;
  }
  let db: SqlClient;
  try {
    db = await openDatabase(dataDir, migrations);
  } catch (error) {
    lock.release();
    throw error;
  }
  return {
    dataDir,
    db,
    lock,
    async close() {
      try {
        await closeDatabase(db);
      } finally {
        lock.release();
      }
    },
  };
}
