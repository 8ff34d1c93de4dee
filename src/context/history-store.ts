import type { HistoryEntry, SummaryEntry } from './types.js';

/** Where a channel's memories belong, remembered with its messages. */
export interface ChannelLocation {
  guildId?: string;
  dmUserId?: string;
}

/** Everything needed to rebuild a channel's live context after a restart. */
export interface LoadedChannel {
  entries: HistoryEntry[];
  summaries: SummaryEntry[];
  nextSeq: number;
  nextTurnId: number;
  archivedCount: number;
  location: ChannelLocation;
  /**
   * The greatest platform (Discord snowflake) message id the channel holds, or undefined: a
   * message whose id is greater cannot be stored yet (snowflakes grow with time), so its ingest
   * needs no look in the database.
   */
  newestPlatformId?: string | undefined;
}

/** Whether `id` is a platform id (digits only) greater than `newest` (any id is, when there is none). */
export function isPlatformIdAfter(id: string, newest: string | undefined): boolean {
  if (!/^[0-9]+$/.test(id)) return false;
  if (newest === undefined) return true;
  return id.length !== newest.length ? id.length > newest.length : id > newest;
}

/** A summary row as it goes into the database (the id comes back). */
export type NewSummary = Omit<SummaryEntry, 'id'> & {
  summarizer?: string;
  /**
   * The first message its summarizer read: a roll-up's range also spans what it folded, and the
   * messages behind a folded truncation marker were never read (the census counts them apart).
   * Absent for a marker.
   */
  readFromSeq?: number;
};

/** How a compaction changes the database, applied in one transaction. */
export interface SpliceChange {
  channelId: string;
  /** The oldest live entries, up to `toSeq`, leave the context. */
  entryRange?: { toSeq: number };
  /** Live summaries folded into the new one. */
  retiredSummaryIds: number[];
  /** A truncation marker that shrinks to the part the summary does not cover. */
  shrunkMarker?: { id: number; fromSeq: number; content: string; tokens: number };
  summary: NewSummary;
}

/**
 * The writes compaction makes to a channel's history, each one transaction: the only part of
 * the history store compaction sees (channel/history-store.ts implements it).
 */
export interface SummaryWrites {
  /** A compaction's result, all or nothing. Returns the new summary's id. */
  splice(change: SpliceChange): Promise<number>;
  /** Emergency truncation: the live entries up to `toSeq` leave, one marker takes their place. */
  truncate(channelId: string, range: { toSeq: number }, marker: NewSummary): Promise<number>;
  /** Emergency truncation folded into the newest marker: its range grows to `toSeq`. */
  extendMarker(channelId: string, marker: { id: number; toSeq: number; content: string; tokens: number }): Promise<void>;
}
