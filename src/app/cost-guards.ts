import { systemClock, type Clock } from '../common/clock.js';
import type { SqlDatabase } from '../storage/database.js';

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

  constructor(
    private readonly clock: Clock = systemClock,
    db?: SqlDatabase,
  ) {
    this.statements = db
      ? {
          read: db.prepare('SELECT tokens FROM token_budget WHERE channel_id = ? AND day = ?'),
          add: db.prepare(
            `INSERT INTO token_budget (channel_id, day, tokens) VALUES (?, ?, ?)
             ON CONFLICT (channel_id, day) DO UPDATE SET tokens = token_budget.tokens + excluded.tokens`,
          ),
          prune: db.prepare('DELETE FROM token_budget WHERE day < ?'),
        }
      : undefined;
  }

  private today(): number {
    return Math.floor(this.clock.now() / DAY_MS);
  }

  spentToday(channelId: string): number {
    if (this.statements) {
      const row = this.statements.read.get(channelId, this.today()) as { tokens: number } | undefined;
      return row?.tokens ?? 0;
    }
    const entry = this.spent.get(channelId);
    return entry && entry.day === this.today() ? entry.tokens : 0;
  }

  record(channelId: string, tokens: number): void {
    const day = this.today();
    const amount = Math.max(0, Math.round(tokens));
    if (this.statements) {
      this.statements.add.run(channelId, day, amount);
      // Past days matter to nobody; a week is kept for an operator who looks.
      this.statements.prune.run(day - 7);
      return;
    }
    const entry = this.spent.get(channelId);
    const base = entry && entry.day === day ? entry.tokens : 0;
    this.spent.set(channelId, { day, tokens: base + amount });
  }

  /** `budget` 0 = unlimited. */
  exhausted(channelId: string, budget: number): boolean {
    return budget > 0 && this.spentToday(channelId) >= budget;
  }
}
