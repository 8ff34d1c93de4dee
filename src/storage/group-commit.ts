import type { SqlClient } from './sql-client.js';

export interface GroupCommitOptions<P> {
  db: SqlClient;
  /**
   * Writes the payloads of one group, inside the group's open transaction: plain database work
   * (never outside work: no model call, no timer) that can run twice (after a rollback) and
   * rejects if any payload cannot be written.
   */
  write: (payloads: P[]) => Promise<void>;
  /** Writes in one transaction at most (a burst is cut into several commits beyond it). */
  maxBatch?: number;
  /**
   * Which payloads are stored, read back after a COMMIT whose outcome is unknown (the connection
   * dropped before its answer). Without it such a group is treated as failed.
   */
  stored?: (payloads: P[]) => Promise<boolean[]>;
  /** Waits between read-back attempts while the store is unreachable (default 0.1 s to 2 s, ~6 s in all). */
  readBackDelaysMs?: readonly number[];
}

/** The code `PgPoolClient` gives a COMMIT that got no answer (pg-error.ts). */
const COMMIT_UNKNOWN = 'storage_commit_unknown';
const READ_BACK_DELAYS_MS: readonly number[] = [100, 250, 500, 1_000, 2_000, 2_000];

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
 * bad payload rejects alone (and a full disk rejects each with its own error). Groups commit one
 * after another, in the order they were formed, never two at once.
 */
export class GroupCommit<P> {
  private queue: QueuedWrite<P>[] = [];
  private scheduled: NodeJS.Immediate | undefined;
  private readonly maxBatch: number;
  private readonly commitGroup: (payloads: P[]) => Promise<void>;
  private readonly stored: ((payloads: P[]) => Promise<boolean[]>) | undefined;
  private readonly readBackDelaysMs: readonly number[];
  /** The flush in progress (or the last one), so the next starts only once it ended. */
  private flushing: Promise<void> = Promise.resolve();
  /** Flushes started and not yet ended. */
  private committing = 0;
  /** Commits done and writes carried (for benchmarks and status); `readBacks`: commits whose outcome had to be read back. */
  readonly stats = { commits: 0, writes: 0, largestGroup: 0, readBacks: 0 };

  constructor(options: GroupCommitOptions<P>) {
    this.maxBatch = options.maxBatch ?? DEFAULT_GROUP_COMMIT_BATCH;
    // No savepoint per write: FTS5 flushes its pending terms to a new segment at every
    // savepoint, which would cost as much as a commit per message.
    this.commitGroup = (payloads) => options.db.transaction(() => options.write(payloads));
    this.stored = options.stored;
    this.readBackDelaysMs = options.readBackDelaysMs ?? READ_BACK_DELAYS_MS;
  }

  /** Writes queued and not yet committed. */
  get pending(): number {
    return this.queue.length;
  }

  /** Nothing queued and no group being committed: a `flush` now would have nothing to wait for. */
  get idle(): boolean {
    return this.queue.length === 0 && this.committing === 0;
  }

  /**
   * Queues `payload` for the next group; resolves once it committed. The promise rejects with the
   * error of its own write, or with the commit's.
   */
  submit(payload: P): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ payload, resolve, reject });
      // A flush never rejects: each write's outcome goes to its own promise.
      if (this.queue.length >= this.maxBatch) void this.flush();
      else this.scheduled ??= setImmediate(() => void this.flush());
    });
  }

  /**
   * Commits everything queued so far (after the group in flight, if any); resolves once all of it
   * committed or failed. A write that must land after the queued ones (a turn's reply, an edit, a
   * compaction's splice) awaits this first. Never rejects: each write's promise carries its own
   * outcome.
   */
  flush(): Promise<void> {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    this.committing += 1;
    this.flushing = this.flushing.then(() => this.commitQueued()).finally(() => (this.committing -= 1));
    return this.flushing;
  }

  private async commitQueued(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
      this.queue = this.queue.length <= this.maxBatch ? [] : this.queue.slice(this.maxBatch);
      let left: QueuedWrite<P>[] | undefined = batch;
      try {
        await this.commitGroup(batch.map((item) => item.payload));
        left = [];
      } catch (error) {
        // The COMMIT got no answer: what it stored is read back before anyone is told anything.
        if (isCommitUnknown(error)) left = await this.readBack(batch, error);
      }
      // Undefined: not even the read-back answered, and every write was told so.
      if (left === undefined) continue;
      if (left.length === 0) {
        this.stats.commits += 1;
        this.stats.writes += batch.length;
        this.stats.largestGroup = Math.max(this.stats.largestGroup, batch.length);
        for (const item of batch) item.resolve();
        continue;
      }
      // One write (or the commit) failed and the whole group rolled back: each write is now
      // tried in a transaction of its own, so only the bad one (or all, if the disk is full) fails.
      await this.commitOneByOne(left);
    }
  }

  private async commitOneByOne(batch: QueuedWrite<P>[]): Promise<void> {
    for (const item of batch) {
      try {
        await this.commitGroup([item.payload]);
        this.stats.commits += 1;
        this.stats.writes += 1;
        item.resolve();
      } catch (error) {
        if (isCommitUnknown(error)) {
          const left = await this.readBack([item], error);
          if (left?.length === 0) this.stats.writes += 1;
          if (left?.length !== 1) continue;
        }
        item.reject(error);
      }
    }
  }

  /**
   * After a COMMIT with no answer: resolves the writes that are stored and returns the rest (the
   * transaction was all or nothing, so that is all of them or none). When the store cannot be
   * read back either, every write rejects with the unknown outcome (and undefined is returned):
   * its caller must not assume the write failed, and the next catch-up (idempotent per message
   * id) settles it.
   */
  private async readBack(batch: QueuedWrite<P>[], unknown: unknown): Promise<QueuedWrite<P>[] | undefined> {
    if (!this.stored) return batch;
    this.stats.readBacks += 1;
    for (let attempt = 0; ; attempt += 1) {
      try {
        const held = await this.stored(batch.map((item) => item.payload));
        const left: QueuedWrite<P>[] = [];
        batch.forEach((item, index) => (held[index] ? item.resolve() : left.push(item)));
        return left;
      } catch (error) {
        if (attempt >= this.readBackDelaysMs.length) {
          for (const item of batch) item.reject(unknown);
          return undefined;
        }
        await new Promise((resolve) => setTimeout(resolve, this.readBackDelaysMs[attempt]));
      }
    }
  }
}

function isCommitUnknown(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === COMMIT_UNKNOWN;
}
