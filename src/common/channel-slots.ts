/**
 * Counts what runs per channel (branches, workers) against a limit read at the moment of asking,
 * so that a hot reload of `max_concurrent` applies to the next request.
 */
export class ChannelSlots {
  private readonly running = new Map<string, number>();

  /** Takes a slot if fewer than `limit` are in use; returns a function that gives it back once. */
  tryAcquire(channelId: string, limit: number): (() => void) | undefined {
    const used = this.running.get(channelId) ?? 0;
    if (used >= limit) return undefined;
    this.running.set(channelId, used + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.running.get(channelId) ?? 1) - 1;
      if (left <= 0) this.running.delete(channelId);
      else this.running.set(channelId, left);
    };
  }

  inUse(channelId: string): number {
    return this.running.get(channelId) ?? 0;
  }
}

/** The daily budget as branches and workers see it (`DailyTokenBudget` satisfies it). */
export interface TokenAccount {
  exhausted(channelId: string, budget: number): boolean;
  record(channelId: string, tokens: number): void;
}
