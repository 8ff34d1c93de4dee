import type { SqlClient } from './sql-client.js';

/**
 * What storage itself says differently on SQLite and PostgreSQL: whether a table exists, and how
 * the bytes of erased rows leave what the database keeps beside its live rows. The one place in
 * storage/ that asks which backend a client is; the capabilities have dialects of their own.
 */
export interface StorageDialect {
  /** SQL with one parameter (a table name) that returns a row when that table exists. */
  readonly tableExists: string;
  /** Clears what erased rows leave behind; resolves with the event that says what was done. */
  clearErasedTraces(db: SqlClient, tables: readonly string[]): Promise<{ type: 'erasure_vacuumed' } | { type: 'erasure_checkpointed'; busy: number; pages: number }>;
}

/** Waits (ms) before each new try of a checkpoint that met a reader: about 3 s in all. */
const CHECKPOINT_RETRIES = [10, 25, 50, 100, 250, 500, 1000, 1000];

const SQLITE_STORAGE_DIALECT: StorageDialect = Object.freeze({
  tableExists: "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
  async clearErasedTraces(db: SqlClient) {
    // The WAL holds every page written since the last checkpoint, the deleted text included: it
    // is copied into the main file (where secure_delete zeroed the freed space) and truncated.
    let result: { busy: number; log: number; checkpointed: number } | undefined;
    for (let attempt = 0; ; attempt += 1) {
      [result] = (await db.pragma('wal_checkpoint(TRUNCATE)')) as Array<{ busy: number; log: number; checkpointed: number }>;
      // busy = 1: a reader held an older snapshot, or the checkpoint thread was copying at that
      // moment. Its copy may even have put a page as it was before the delete into the main file;
      // only a whole checkpoint after the delete replaces it, so it is tried again shortly.
      if ((result?.busy ?? 0) === 0 || attempt >= CHECKPOINT_RETRIES.length) break;
      await new Promise((resolve) => setTimeout(resolve, CHECKPOINT_RETRIES[attempt]));
    }
    return { type: 'erasure_checkpointed' as const, busy: result?.busy ?? 0, pages: result?.checkpointed ?? 0 };
  },
});

const POSTGRES_STORAGE_DIALECT: StorageDialect = Object.freeze({
  tableExists: 'SELECT 1 FROM (SELECT to_regclass(?) AS present) AS t WHERE present IS NOT NULL',
  async clearErasedTraces(db: SqlClient, tables: readonly string[]) {
    // Dead row versions are pruned; VACUUM cannot run inside a transaction, `exec` sends it alone.
    await db.exec(`VACUUM ${tables.join(', ')}`);
    return { type: 'erasure_vacuumed' as const };
  },
});

/** The storage dialect of a client, from the dialect it declares. */
export function storageDialectFor(db: Pick<SqlClient, 'dialect'>): StorageDialect {
  return db.dialect === 'postgres' ? POSTGRES_STORAGE_DIALECT : SQLITE_STORAGE_DIALECT;
}
