/**
 * Coalesces bursts per key: the work fires `quietMs` after the last push, but never later than
 * `maxWaitMs` after the first push of the burst. Items pushed during a burst are handed over
 * together.
 */
export class Debouncer<T> {
  private readonly pending = new Map<string, { items: T[]; firstAt: number; timer: NodeJS.Timeout }>();

  /**
   * `maxItems`: most items a burst keeps (the newest): a flood into one channel costs bounded
   * memory while it waits, and its turn answers the newest message anyway. `dropped` is given
   * each item let go without firing (over `maxItems`, or cancelled).
   */
  constructor(
    private readonly fire: (key: string, items: T[]) => void,
    private readonly maxItems = Number.POSITIVE_INFINITY,
    private readonly dropped?: (item: T) => void,
  ) {}

  push(key: string, item: T, timing: { quietMs: number; maxWaitMs: number }): void {
    const now = Date.now();
    const existing = this.pending.get(key);
    if (existing) clearTimeout(existing.timer);
    const firstAt = existing?.firstAt ?? now;
    const items = existing?.items ?? [];
    items.push(item);
    if (items.length > this.maxItems) for (const removed of items.splice(0, items.length - this.maxItems)) this.dropped?.(removed);
    const delay = Math.max(0, Math.min(timing.quietMs, firstAt + timing.maxWaitMs - now));
    const timer = setTimeout(() => this.release(key), delay);
    this.pending.set(key, { items, firstAt, timer });
  }

  get size(): number {
    return this.pending.size;
  }

  /** Fires every pending burst now (shutdown with grace). */
  flushAll(): void {
    for (const key of [...this.pending.keys()]) this.release(key);
  }

  /** Drops every pending burst without firing. */
  cancelAll(): void {
    const entries = [...this.pending.values()];
    this.pending.clear();
    for (const entry of entries) {
      clearTimeout(entry.timer);
      for (const item of entry.items) this.dropped?.(item);
    }
  }

  private release(key: string): void {
    const entry = this.pending.get(key);
    if (!entry) return;
    clearTimeout(entry.timer);
    this.pending.delete(key);
    this.fire(key, entry.items);
  }
}
