import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { closeDatabase, DATABASE_FILE, openDatabase, type Migration, type SchemaStepListener } from './database.js';
import type { SqlClient } from './sql-client.js';
import { startWalCheckpointer, type WalCheckpointer } from './wal-checkpointer.js';
import { WriterLock } from './writer-lock.js';
import { SerialClient } from './serial-client.js';
import { WriterThread } from './writer-thread.js';

/** A data dir opened by its one writer: the lock is held until `close`. */
export interface WritableDataDir {
  dataDir: string;
  db: SqlClient;
  lock: WriterLock;
  /** The thread that checkpoints the WAL, when asked for one. */
  checkpointer?: WalCheckpointer;
  /** Closes the database, then releases the lock. */
  close(): Promise<void>;
}

/**
 * Long-running writers (the bot, a replay) checkpoint from a thread of their own
 * (wal-checkpointer.ts) and commit a burst's groups from another (writer-thread.ts).
 */
export interface BackgroundCheckpoints {
  checkpointInBackground?: boolean;
  /** Hears why the thread could not checkpoint (once per distinct failure). */
  onCheckpointFailure?: (error: string) => void;
  /** Group commits run on a writer thread of their own. */
  commitInBackground?: boolean;
  /** Hears why the writer thread stopped (group commits then run on the event loop). */
  onWriterThreadFailure?: (error: string) => void;
}

/**
 * Opens a data dir for writing: takes the writer lock first (a second writer is refused at once,
 * naming the holder), then opens and migrates the database. Writers are `start`, `chat`,
 * `replay` and `memory forget`; readers use `openDatabase(dir, migrations, { readOnly: true })`.
 */
export async function openDataDirForWriting(
  dataDir: string,
  migrations: readonly Migration[],
  options: { command: string; onSchemaStep?: SchemaStepListener } & BackgroundCheckpoints,
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
    db = await openDatabase(dataDir, migrations, options.onSchemaStep ? { onSchemaStep: options.onSchemaStep } : {});
  } catch (error) {
    lock.release();
    throw error;
  }
  if (options.commitInBackground && db instanceof SerialClient) {
    db.useWriterThread(new WriterThread(join(dataDir, DATABASE_FILE), { onFailure: (error) => options.onWriterThreadFailure?.(error) }));
  }
  let checkpointer: WalCheckpointer | undefined;
  if (options.checkpointInBackground) {
    try {
      checkpointer = startWalCheckpointer(join(dataDir, DATABASE_FILE), { onFailure: (error) => options.onCheckpointFailure?.(error) });
    } catch (error) {
      // The writer's own checkpoints still run: slower, never lost.
      options.onCheckpointFailure?.(error instanceof Error ? error.message : String(error));
    }
  }
  return {
    dataDir,
    db,
    lock,
    ...(checkpointer ? { checkpointer } : {}),
    async close() {
      try {
        await checkpointer?.close();
        await closeDatabase(db);
      } finally {
        lock.release();
      }
    },
  };
}
