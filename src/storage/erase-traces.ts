import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import { isPostgres, type SqlClient } from './sql-client.js';

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
    if (isPostgres(db)) {
      // VACUUM cannot run inside a transaction; `exec` sends it on its own.
      await db.exec(`VACUUM ${ERASED_TABLES.join(', ')}`);
      events.emit({ type: 'erasure_vacuumed', ...(channelId ? { channel_id: channelId } : {}), duration_ms: Math.round(performance.now() - started) });
      return;
    }
    const [result] = (await db.pragma('wal_checkpoint(TRUNCATE)')) as Array<{ busy: number; log: number; checkpointed: number }>;
    events.emit({
      type: 'erasure_checkpointed',
      ...(channelId ? { channel_id: channelId } : {}),
      // busy = 1: a reader held an older snapshot, so part of the WAL could not be cleared yet
      // (the next checkpoint does it).
      busy: result?.busy ?? 0,
      pages: result?.checkpointed ?? 0,
      duration_ms: Math.round(performance.now() - started),
    });
  } catch (error) {
    events.emit({ type: 'erasure_checkpoint_failed', ...(channelId ? { channel_id: channelId } : {}), error: errorMessage(error) });
  }
}
