import type { ChannelState } from '../context/channel-state.js';

/** The prompt cache's lifetime in ms for `[llm] prompt_cache`, or undefined when caching is off. */
export function cacheLifetimeMs(setting: string | undefined): number | undefined {
  if (setting === '5m') return 5 * 60_000;
  if (setting === '1h') return 60 * 60_000;
  return undefined;
}

/**
 * When the channel's prompt cache went (or goes) cold: its last model request or message,
 * whichever is newer, plus the cache's lifetime. Undefined without caching or activity.
 */
export function cacheColdAt(state: ChannelState, promptCache: string | undefined): number | undefined {
  const lifetime = cacheLifetimeMs(promptCache);
  if (lifetime === undefined) return undefined;
  const lastActive = Math.max(state.lastRequest?.at ?? Number.NEGATIVE_INFINITY, state.entries.at(-1)?.createdAt ?? Number.NEGATIVE_INFINITY);
  return Number.isFinite(lastActive) ? lastActive + lifetime : undefined;
}
