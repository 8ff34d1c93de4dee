/**
 * What one process changed that other processes serving the same store must see: a channel's
 * messages deleted or edited, a persona, a compaction that landed, an erasure asked for. A change
 * names what changed (a kind, a channel, ids), never any text: the listener re-reads the rest
 * from the store. On SQLite one process owns the data dir, so the feed is a no-op there.
 */
type ChangeKind =
  /** Messages left history (a delete on the platform, forget-me); `ids` are their message ids. */
  | 'messages_deleted'
  /** A message's text changed (an edit, or a redaction of the deleted words it quoted). */
  | 'message_edited'
  /** The channel's live context changed otherwise: a compaction landed, a summary was rewritten. */
  | 'context_changed'
  /** The channel's persona was set or cleared. */
  | 'persona_changed'
  /** An erasure request waits in `erasure_requests` (sent by the database on insert). */
  | 'erasure_requested';

const CHANGE_KINDS: readonly ChangeKind[] = ['messages_deleted', 'message_edited', 'context_changed', 'persona_changed', 'erasure_requested'];

export interface StoreChange {
  kind: ChangeKind;
  channelId?: string;
  ids?: string[];
}

export interface ChangeFeed {
  /** True when changes travel between processes (PostgreSQL); false for the no-op. */
  readonly live: boolean;
  /**
   * Tells the other processes. Called from inside a store transaction's async context, it is
   * sent when that transaction commits and never if it rolls back; outside one, at once (call it
   * after the write committed). A failure to send is the caller's to report, not to retry.
   */
  publish(change: StoreChange): Promise<void>;
  /** Calls `handler` for each change another process published; returns what stops it. */
  subscribe(handler: (change: StoreChange) => void): () => void;
  /** Calls `handler` after the feed reconnected: changes sent meanwhile were missed, re-read everything. */
  onResubscribed(handler: () => void): () => void;
  close(): Promise<void>;
}

/** One process per data dir: nobody else to tell, nothing to hear. */
export const NO_CHANGE_FEED: ChangeFeed = {
  live: false,
  publish: () => Promise.resolve(),
  subscribe: () => () => undefined,
  onResubscribed: () => () => undefined,
  close: () => Promise.resolve(),
};

/** Reads a change from its wire form; undefined for anything that is not one (ignored, never thrown). */
export function parseChange(payload: string): (StoreChange & { origin?: string }) | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { kind, channelId, ids, origin } = value as Record<string, unknown>;
  if (!CHANGE_KINDS.includes(kind as ChangeKind)) return undefined;
  const change: StoreChange & { origin?: string } = { kind: kind as ChangeKind };
  if (typeof channelId === 'string') change.channelId = channelId;
  if (Array.isArray(ids)) change.ids = ids.filter((id): id is string => typeof id === 'string');
  if (typeof origin === 'string') change.origin = origin;
  return change;
}
