import type { ChannelState } from '../context/channel-state.js';

export interface ChannelCacheOptions {
  /** Builds a channel's state from the database. */
  load(channelId: string): Promise<ChannelState>;
  /** True when nothing is in flight for the channel, so dropping it loses nothing. */
  isQuiet(state: ChannelState): boolean;
  /** Called for each channel dropped (release what hangs off it: its vector index...). */
  unloaded(state: ChannelState, reason: 'idle' | 'cap'): void;
  /** Read at every check, so a hot reload applies at once. */
  limits(): { idleMs: number; maxLoaded: number };
  now(): number;
}

/**
 * The channels loaded in memory, least recently used first. A channel comes back from SQLite
 * exactly as it was (history, summaries, markers are all stored), so memory is bounded by the
 * cap, not by the number of channels ever seen. Only quiet channels are dropped: a turn, a
 * compaction or a write in flight keeps its channel loaded, even over the cap.
 */
export class ChannelCache {
  private readonly states = new Map<string, { state: ChannelState; usedAt: number }>();
  /** Channels being read from the database now: a second caller waits for the same read. */
  private readonly loading = new Map<string, Promise<ChannelState>>();
  /** The channel used last: asked again (a busy channel's checks), it is already in place. */
  private newest: string | undefined;

  constructor(private readonly options: ChannelCacheOptions) {}

  get size(): number {
    return this.states.size;
  }

  /** The channel's state, loaded if needed, marked most recently used. */
  get(channelId: string): Promise<ChannelState> {
    const found = this.touch(channelId);
    if (found) return Promise.resolve(found);
    let loading = this.loading.get(channelId);
    if (!loading) {
      loading = this.options.load(channelId).then(
        (state) => {
          this.loading.delete(channelId);
          this.states.set(channelId, { state, usedAt: this.options.now() });
          this.newest = channelId;
          this.evict({ keep: channelId });
          return state;
        },
        (error: unknown) => {
          this.loading.delete(channelId);
          throw error;
        },
      );
      this.loading.set(channelId, loading);
    }
    return loading;
  }

  /** The loaded state, marked most recently used; undefined when the channel is not loaded. */
  touch(channelId: string): ChannelState | undefined {
    const found = this.states.get(channelId);
    if (!found) return undefined;
    found.usedAt = this.options.now();
    if (channelId === this.newest) return found.state;
    // Re-inserted at the end: a Map iterates in insertion order, oldest first.
    this.states.delete(channelId);
    this.states.set(channelId, found);
    this.newest = channelId;
    return found.state;
  }

  /** The loaded state, if any, without loading or touching it. */
  peek(channelId: string): ChannelState | undefined {
    return this.states.get(channelId)?.state;
  }

  values(): IterableIterator<ChannelState> {
    return [...this.states.values()].map((entry) => entry.state)[Symbol.iterator]();
  }

  /** Drops quiet channels idle longer than `channel_idle_ms`, and beyond the cap. Returns how many. */
  evict(options: { keep?: string } = {}): number {
    const { idleMs, maxLoaded } = this.options.limits();
    const now = this.options.now();
    let dropped = 0;
    for (const [channelId, entry] of this.states) {
      const idle = now - entry.usedAt >= idleMs;
      const over = this.states.size > maxLoaded;
      // Oldest first: once one is neither idle nor over the cap, none after it is.
      if (!idle && !over) break;
      if (channelId === options.keep || !this.options.isQuiet(entry.state)) continue;
      this.states.delete(channelId);
      this.options.unloaded(entry.state, idle ? 'idle' : 'cap');
      dropped += 1;
    }
    return dropped;
  }
}
