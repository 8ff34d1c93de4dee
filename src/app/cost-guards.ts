import { systemClock, type Clock } from '../common/clock.js';
import type { SqlClient } from '../storage/sql-client.js';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/** Turns per user in a sliding one-minute window. */
export class UserRateLimiter {
  private readonly recent = new Map<string, number[]>();

  constructor(private readonly clock: Clock = systemClock) {}

  /** Takes one turn for the user if the limit allows it; `limitPerMinute` 0 = unlimited. */
  tryAcquire(userId: string, limitPerMinute: number): boolean {
    if (limitPerMinute <= 0) return true;
    const now = this.clock.now();
    const times = (this.recent.get(userId) ?? []).filter((at) => now - at < MINUTE_MS);
    if (times.length >= limitPerMinute) {
      this.recent.set(userId, times);
      return false;
    }
    times.push(now);
    this.recent.set(userId, times);
    return true;
  }

  /** Seconds until the user may trigger a turn again. */
  retryAfterSeconds(userId: string): number {
    const times = this.recent.get(userId) ?? [];
    if (times.length === 0) return 0;
    return Math.max(1, Math.ceil((times[0]! + MINUTE_MS - this.clock.now()) / 1000));
  }
}

/**
 * Estimated model tokens spent per channel per UTC day: the cost guard. Callers count a thread
 * under its parent channel, so opening threads does not multiply the budget. With a database
 * the count lives in SQLite (`token_budget`) and survives restarts; without one (tests of the
 * guard alone) it is kept in memory.
 */
export class DailyTokenBudget {
  private readonly spent = new Map<string, { day: number; tokens: number }>();
  private readonly statements;
  /** The write in progress (or the last one): spending is written in the order it was recorded. */
  private writing: Promise<void> = Promise.resolve();
  /** Settles once today's stored spending is in memory (rejects with the read's error). */
  readonly ready: Promise<void>;

  /** A budget whose stored spending of today is already read. */
  static async open(clock: Clock, db: SqlClient, onWriteFailed?: (error: unknown) => void): Promise<DailyTokenBudget> {
    const budget = new DailyTokenBudget(clock, db, onWriteFailed);
    await budget.ready;
    return budget;
  }

  /**
   * Reads are served from memory (every turn asks); with `db` the spending is also kept there,
   * so a restart does not forgive the day's spending. A failed write goes to `onWriteFailed`.
   */
  constructor(
    private readonly clock: Clock = systemClock,
    db?: SqlClient,
    private readonly onWriteFailed?: (error: unknown) => void,
  ) {
    this.statements = db
      ? {
          add: db.prepare(
            `INSERT INTO token_budget (channel_id, day, tokens) VALUES (?, ?, ?)
             ON CONFLICT (channel_id, day) DO UPDATE SET tokens = token_budget.tokens + excluded.tokens`,
          ),
          prune: db.prepare('DELETE FROM token_budget WHERE day < ?'),
        }
      : undefined;
    this.ready = db ? this.readToday(db) : Promise.resolve();
    // Whoever awaits `ready` sees its error; nobody awaiting is no reason for an unhandled rejection.
    this.ready.catch(() => {});
  }

  private async readToday(db: SqlClient): Promise<void> {
    const day = this.today();
    const rows = (await db.prepare('SELECT channel_id, tokens FROM token_budget WHERE day = ?').all(day)) as Array<{ channel_id: string; tokens: number }>;
    for (const row of rows) {
      const entry = this.spent.get(row.channel_id);
      // Spending recorded while the read was answered adds to what was stored.
      this.spent.set(row.channel_id, { day, tokens: Number(row.tokens) + (entry && entry.day === day ? entry.tokens : 0) });
    }
  }

  private today(): number {
    return Math.floor(this.clock.now() / DAY_MS);
  }

  spentToday(channelId: string): number {
    const entry = this.spent.get(channelId);
    return entry && entry.day === this.today() ? entry.tokens : 0;
  }

  record(channelId: string, tokens: number): void {
    const day = this.today();
    const amount = Math.max(0, Math.round(tokens));
    const entry = this.spent.get(channelId);
    const base = entry && entry.day === day ? entry.tokens : 0;
    this.spent.set(channelId, { day, tokens: base + amount });
    const statements = this.statements;
    if (!statements) return;
    this.writing = this.writing
      .then(async () => {
        await statements.add.run(channelId, day, amount);
        // Past days matter to nobody; a week is kept for an operator who looks.
        await statements.prune.run(day - 7);
      })
      .catch((error: unknown) => this.onWriteFailed?.(error));
  }

  /** Resolves once the spending recorded so far is written (or its write failed and was reported). */
  settled(): Promise<void> {
    return this.writing;
  }

  /** `budget` 0 = unlimited. */
  exhausted(channelId: string, budget: number): boolean {
    return budget > 0 && this.spentToday(channelId) >= budget;
  }
}
