import { COMMIT_UNKNOWN, WRITES_HELD, type SqlClient } from './sql-client.js';

export interface GroupCommitOptions<P> {
  db: SqlClient;
  /**
   * Writes the payloads of one group, inside the group's open transaction: plain database work
   * (never outside work: no model call, no timer) that can run twice (after a rollback) and
   * rejects if any payload cannot be written.
   */
  write: (payloads: P[]) => Promise<void>;
  /**
   * Commits a group of several payloads some cheaper way than `write` in a transaction (SQLite's
   * writer thread), resolving true once committed; false when it cannot now, and `write` does.
   * Rejects as `write` would (the group is then retried one payload at a time, through `write`).
   */
  commitWhole?: (payloads: P[]) => Promise<boolean>;
  /** Writes in one transaction at most (a burst is cut into several commits beyond it). */
  maxBatch?: number;
  /**
   * Groups written at once, each in its own transaction (default 1: one after another). Above 1
   * only where concurrent transactions run in parallel (PostgreSQL's pool), not on one connection.
   */
  concurrency?: number;
  /**
   * Which payloads are stored, read back after a COMMIT whose outcome is unknown (the connection
   * dropped before its answer). Without it such a group is treated as failed.
   */
  stored?: (payloads: P[]) => Promise<boolean[]>;
  /** Waits between read-back attempts while the store is unreachable (default 0.1 s to 2 s, ~6 s in all). */
  readBackDelaysMs?: readonly number[];
}

const READ_BACK_DELAYS_MS: readonly number[] = [100, 250, 500, 1_000, 2_000, 2_000];

interface QueuedWrite<P> {
  payload: P;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Outcomes told in one turn of the event loop at most (see `tell`). */
const TOLD_PER_TURN = 500;

/** How many writes one commit carries at most, by default. */
export const DEFAULT_GROUP_COMMIT_BATCH = 1_000;

/**
 * Group commit. Each payload is queued and its promise settles once the transaction that carries
 * it has committed, so a caller that awaits it knows its rows are durable (in SQLite's WAL, they
 * survive `kill -9`). Payloads queued during the same turn of the event loop share one commit: a
 * message alone is committed at the next `setImmediate` (no timer, no added delay), while under
 * load everything that arrived while the groups in flight ran goes in the next one. The whole
 * group goes to one `write` call, so a backend where each statement is a round trip (PostgreSQL)
 * can write it in a few multi-row statements.
 *
 * A group whose write throws rolls back; it is then retried one payload per transaction, so the
 * bad payload rejects alone (and a full disk rejects each with its own error). A group held back
 * before it was sent (`WRITES_HELD`: the writer lock is not confirmed) fails whole at once.
 *
 * With `concurrency` above 1 (PostgreSQL, where a transaction holds a connection of its own), the
 * next group is written while the previous one commits. Their rows never overlap: a message is
 * admitted once per channel and has its own seq. Outcomes are still told in the order the groups
 * were formed, so no caller hears of a later message before an earlier one is decided; a group
 * that fails after a later one committed leaves a gap in that channel's seqs, as a single
 * message failing inside a group already can.
 */
export class GroupCommit<P> {
  private queue: QueuedWrite<P>[] = [];
  private scheduled: NodeJS.Immediate | undefined;
  private readonly maxBatch: number;
  private readonly concurrency: number;
  private readonly commitGroup: (payloads: P[]) => Promise<void>;
  private readonly stored: ((payloads: P[]) => Promise<boolean[]>) | undefined;
  private readonly readBackDelaysMs: readonly number[];
  /** Groups being written now. */
  private inFlight = 0;
  /** Payloads queued so far, and how many of the first of them have been told their outcome. */
  private submitted = 0;
  private told = 0;
  /** Outcomes are told group after group, in the order the groups were formed. */
  private telling: Promise<void> = Promise.resolve();
  /** `flush` callers, each waiting for the payloads queued before it. */
  private waiters: Array<{ upTo: number; resolve: () => void }> = [];
  /**
   * Commits done and writes carried (for benchmarks and status); `readBacks`: commits whose
   * outcome had to be read back; `whole`: groups `commitWhole` committed.
   */
  readonly stats = { commits: 0, writes: 0, largestGroup: 0, readBacks: 0, whole: 0 };

  constructor(options: GroupCommitOptions<P>) {
    this.maxBatch = options.maxBatch ?? DEFAULT_GROUP_COMMIT_BATCH;
    this.concurrency = Math.max(1, options.concurrency ?? 1);
    // No savepoint per write: FTS5 flushes its pending terms to a new segment at every
    // savepoint, which would cost as much as a commit per message.
    const whole = options.commitWhole;
    this.commitGroup = async (payloads) => {
      // A group of one is a retry or a quiet channel: where the failing write is named, or too small to send away.
      if (whole && payloads.length > 1 && (await whole(payloads))) {
        this.stats.whole += 1;
        return;
      }
      await options.db.transaction(() => options.write(payloads));
    };
    this.stored = options.stored;
    this.readBackDelaysMs = options.readBackDelaysMs ?? READ_BACK_DELAYS_MS;
  }

  /** Writes queued and not yet in a group being committed. */
  get pending(): number {
    return this.queue.length;
  }

  /** Nothing queued and no group being committed: a `flush` now would have nothing to wait for. */
  get idle(): boolean {
    return this.told === this.submitted;
  }

  /**
   * Queues `payload` for the next group; resolves once it committed. The promise rejects with the
   * error of its own write, or with the commit's.
   */
  submit(payload: P): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ payload, resolve, reject });
      this.submitted += 1;
      if (this.queue.length >= this.maxBatch) this.startGroups();
      else this.scheduled ??= setImmediate(() => this.startGroups());
    });
  }

  /**
   * Commits everything queued so far (after the groups in flight, if any); resolves once all of
   * it committed or failed. A write that must land after the queued ones (a turn's reply, an edit,
   * a compaction's splice) awaits this first. Never rejects: each write's promise carries its own
   * outcome.
   */
  flush(): Promise<void> {
    this.startGroups();
    if (this.told >= this.submitted) return Promise.resolve();
    return new Promise<void>((resolve) => this.waiters.push({ upTo: this.submitted, resolve }));
  }

  /** Forms groups from the queue while fewer than `concurrency` are being written. */
  private startGroups(): void {
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
    while (this.inFlight < this.concurrency && this.queue.length > 0) {
      const batch = this.queue.length <= this.maxBatch ? this.queue : this.queue.slice(0, this.maxBatch);
      this.queue = this.queue.length <= this.maxBatch ? [] : this.queue.slice(this.maxBatch);
      this.inFlight += 1;
      const outcomes = this.decide(batch);
      // Told after every group formed before it, whatever order the commits finish in.
      this.telling = Promise.all([this.telling, outcomes]).then(([, decided]) => this.tell(decided));
      void outcomes.finally(() => {
        this.inFlight -= 1;
        // What queued up meanwhile goes now, as one group, rather than a turn of the loop later.
        this.startGroups();
      });
    }
  }

  /**
   * Writes a group and decides each write's outcome without telling anyone yet. Never rejects.
   * Each decision is a function that settles the write's promise.
   */
  private async decide(batch: QueuedWrite<P>[]): Promise<Array<() => void>> {
    const decided: Array<() => void> = [];
    // Stand-ins for the writes: what they are told is recorded, to be told in group order.
    const held = batch.map((item) => ({
      payload: item.payload,
      resolve: () => void decided.push(item.resolve),
      reject: (error: unknown) => void decided.push(() => item.reject(error)),
    }));
    try {
      let left: QueuedWrite<P>[] | undefined = held;
      try {
        await this.commitGroup(batch.map((item) => item.payload));
        left = [];
      } catch (error) {
        // The COMMIT got no answer: what it stored is read back before anyone is told anything.
        if (isCommitUnknown(error)) left = await this.readBack(held, error);
        // Held back before anything was sent (the writer lock is not confirmed): every write
        // fails with it at once, rather than each waiting as long again one by one.
        else if (isWritesHeld(error)) {
          for (const item of held) item.reject(error);
          return decided;
        }
      }
      // Undefined: not even the read-back answered, and every write was decided so.
      if (left === undefined) return decided;
      if (left.length === 0) {
        this.stats.commits += 1;
        this.stats.writes += batch.length;
        this.stats.largestGroup = Math.max(this.stats.largestGroup, batch.length);
        for (const item of held) item.resolve();
        return decided;
      }
      // One write (or the commit) failed and the whole group rolled back: each write is now
      // tried in a transaction of its own, so only the bad one (or all, if the disk is full) fails.
      await this.commitOneByOne(left);
    } catch (error) {
      // Nothing above throws; should it, no write may be left waiting.
      decided.length = 0;
      for (const item of batch) decided.push(() => item.reject(error));
    }
    return decided;
  }

  /**
   * Tells a group's outcomes, a slice per turn of the event loop: each write told sets off its
   * caller's continuation, and thousands of them at once (two groups of 4,000 landing together on
   * PostgreSQL) held the loop for tens of milliseconds.
   */
  private tell(decided: ReadonlyArray<() => void>): Promise<void> | void {
    if (decided.length <= TOLD_PER_TURN) {
      this.settle(decided);
      return;
    }
    return new Promise<void>((resolve) => {
      let next = 0;
      const step = (): void => {
        const end = Math.min(decided.length, next + TOLD_PER_TURN);
        this.settle(decided.slice(next, end));
        next = end;
        if (next < decided.length) setImmediate(step);
        else resolve();
      };
      step();
    });
  }

  private settle(decided: ReadonlyArray<() => void>): void {
    for (const settle of decided) settle();
    this.told += decided.length;
    if (this.waiters.length === 0) return;
    const due = this.waiters.filter((waiter) => waiter.upTo <= this.told);
    this.waiters = this.waiters.filter((waiter) => waiter.upTo > this.told);
    for (const waiter of due) waiter.resolve();
  }

  private async commitOneByOne(batch: QueuedWrite<P>[]): Promise<void> {
    for (const [index, item] of batch.entries()) {
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
        // Held back (the writer lock went unconfirmed meanwhile): the rest would be too, each after a wait.
        if (isWritesHeld(error)) {
          for (const rest of batch.slice(index + 1)) rest.reject(error);
          return;
        }
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

function isWritesHeld(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === WRITES_HELD;
}

function isCommitUnknown(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === COMMIT_UNKNOWN;
}
