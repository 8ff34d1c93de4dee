import type { ChannelLocks } from '../storage/channel-locks.js';
import { PgChannelLocks } from '../storage/postgres/pg-channel-locks.js';
import type { SqlClient } from '../storage/sql-client.js';

/**
 * The compaction locks a runtime on this store is handed: on a shared store (PostgreSQL) one
 * process at a time compacts a channel; a SQLite file has one writer already.
 */
export function compactionLocksFor(db: SqlClient): ChannelLocks | undefined {
  return db.dialect === 'postgres' ? new PgChannelLocks(db) : undefined;
}
