import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { SqlClient } from './sql-client.js';
import { storageDialectFor } from './storage-dialect.js';

/** The tables an erasure deletes from or rewrites (PostgreSQL vacuums them afterwards). */
const ERASED_TABLES = ['history_entries', 'history_summaries', 'memory_items', 'memory_vectors', 'memory_vector_backlog', 'worker_tasks'];

/**
 * After a delete or a forget, the old bytes leave what the database still keeps beside the
 * live rows. SQLite: the WAL (which holds every page written since the last checkpoint, the
 * deleted text included) is copied into the main file, where `secure_delete` has zeroed the
 * freed space, and truncated to nothing. PostgreSQL: the touched tables are vacuumed, so that
 * dead row versions are pruned (what PostgreSQL keeps beyond that is for the operator; see the
 * privacy documentation). Never throws: a failure is reported, the erasure itself stands.
 */
export async function clearErasedTraces(db: SqlClient, events: EventStream, channelId?: string): Promise<void> {
  const started = performance.now();
  try {
    const done = await storageDialectFor(db).clearErasedTraces(db, ERASED_TABLES);
    events.emit({ ...done, ...(channelId ? { channel_id: channelId } : {}), duration_ms: Math.round(performance.now() - started) });
  } catch (error) {
    events.emit({ type: 'erasure_checkpoint_failed', ...(channelId ? { channel_id: channelId } : {}), error: errorMessage(error) });
  }
}
