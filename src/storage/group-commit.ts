import type { SqlDatabase } from './database.js';

export interface GroupCommitOptions<P> {
  db: SqlDatabase;
  /**
   * Writes the payloads of one group, inside the group's open transaction: plain database work
   * that can run twice (after a rollback) and throws if any payload cannot be written.
   */
  write: (payloads: P[]) => void;
  /** Writes in one transaction at most (a burst is cut into several commits beyond it). */
  maxBatch?: number;
}

interface QueuedWrite<P> {
  payload: P;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** How many writes one commit carries at most, by default. */
export const DEFAULT_GROUP_COMMIT_BATCH = 1_000;

/**
 * Group commit over one database connection. Each payload is queued and its promise settles once
 * the transaction that carries it has committed, so a caller that awaits it knows its rows are
 * durable (in SQLite's WAL, they survive `kill -9`). Payloads queued during the same turn of the
 * event loop share one commit: a message alone is committed at the next `setImmediate` (no
 * timer, no added delay), while under load everything that arrived while the previous batch ran
 * goes in the next one. The whole group goes to one `write` call, so a backend where each
 * statement is a round trip (PostgreSQL) can write it in a few multi-row statements.
 *
 * A group whose write throws rolls back; it is then retried one payload per transaction, so the
 * bad payload rejects alone (and a full disk rejects each with its own error).
 */
export class GroupCommit<P> {
  private queue: QueuedWrite<P>[] = [];
  private scheduled: NodeJS.Immediate | undefined;
  private readonly maxBatch: number;
  private readonly commitGroup: (payloads: P[]) => void;
  /** Commits done and writes carried (for benchmarks and status). */
  readonly stats = { commits: 0, writes: 0, largestGroup: 0 };

  constructor(options: GroupCommitOptions<P>) {
    this.maxBatch = options.maxBatch ?? DEFAULT_GROUP_COMMIT_BATCH;
    // No savepoint per write: FTS5 flushes its pending terms to a new segment at every
    // savepoint, which would cost as much as a commit per message.
    this.commitGroup = options.db.transaction((payloads: P[]) => options.write(payloads));
  }

  /** Writes queued and not yet committed. */
  get pending(): number {
    return this.queue.length;
  }

  /**
   * Queues `payload` for the next group; resolves once it committed. The promise rejects with the
   * error of its own write, or with the commit's.
   */
  submit(payload: P): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ payload, resolve, reject });
      if (this.queue.length >= this.maxBatch) this.flush();
      else this.scheduled ??= setImmediate(() => this.flush());
    });
  }

  /**
   * Commits everything queued, now and synchronously: a write that must land after the queued
   * ones (a turn's reply, an edit, a compaction's splice) calls this first. The queued writes'
   * promises still settle asynchronously.
   */
  flush(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    while (this.queue.length > 0) {
      const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
      this.queue = this.queue.length <= this.maxBatch ? [] : this.queue.slice(this.maxBatch);
      try {
        this.commitGroup(batch.map((item) => item.payload));
      } catch {
        // One write (or the commit) failed and the whole group rolled back: each write is now
        // tried in a transaction of its own, so only the bad one (or all, if the disk is full) fails.
        this.commitOneByOne(batch);
        continue;
      }
      this.stats.commits += 1;
      this.stats.writes += batch.length;
      this.stats.largestGroup = Math.max(this.stats.largestGroup, batch.length);
      for (const item of batch) item.resolve();
    }
  }

  private commitOneByOne(batch: QueuedWrite<P>[]): void {
    for (const item of batch) {
      try {
        this.commitGroup([item.payload]);
        this.stats.commits += 1;
        this.stats.writes += 1;
        item.resolve();
      } catch (error) {
        item.reject(error);
      }
    }
  }
}
