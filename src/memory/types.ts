/**
 * The memory seam: what the channel, its agent, the compaction worker and the CLI may ask of
 * long-term memory. The database (SQLite or PostgreSQL) is the source of truth behind it;
 * vector indexes are derived. Whatever touches the database answers with a promise.
 */
import type { ChannelView } from '../privacy/channel-views.js';
import type { ScriptStep } from '../storage/sql-client.js';

/** Who may see which channel is privacy's to say; memory is handed it. */
export type { ChannelView, ViewLookup, ViewRegistry } from '../privacy/channel-views.js';

export const MEMORY_TYPES = [
  'fact',
  'preference',
  'decision',
  'identity',
  'event',
  'observation',
  'goal',
  'todo',
] as const;
export type MemoryType = (typeof MEMORY_TYPES)[number];

export type MemoryKind = 'memory' | 'transcript';

/** Where a memory is visible. `user` is used for DMs: the memory belongs to that user. */
export type MemoryScopeKind = 'channel' | 'user' | 'guild' | 'global';

/** Where the caller stands; decides what it may read and where a saved memory belongs. */
export interface MemoryLocation {
  channelId: string;
  guildId?: string;
  /** Set for DMs: the user the DM belongs to. */
  dmUserId?: string;
}

export interface SaveMemoryInput {
  location: MemoryLocation;
  content: string;
  memoryType: MemoryType;
  /** In [0, 1]; a default per type when absent. */
  importance?: number;
  sourceIds?: string[];
}

export interface SaveMemoryResult {
  id: string;
  status: 'saved' | 'updated';
}

/** One archived message, indexed so that search finds what was said after it left the context. */
export interface TranscriptEntryInput {
  messageId: string;
  channelId: string;
  guildId?: string;
  dmUserId?: string;
  authorId: string;
  authorName: string;
  content: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
}

export interface SearchQuery {
  location: MemoryLocation;
  query: string;
  /** At most 20; default 5. */
  limit?: number;
  memoryType?: MemoryType;
  kind?: MemoryKind;
}

/** A message next to a transcript hit, so a reader sees what came just before and after it. */
export interface SearchNeighbor {
  position: 'before' | 'after';
  message_id: string;
  author: string;
  /** ISO 8601. */
  created_at: string;
  /** The message's text, without its author (named above). */
  content: string;
}

/** A search hit, in the shape the `memory_search` tool returns. */
export interface SearchResult {
  id: string;
  content: string;
  /** In [0, 1]; unrelated text scores near 0. */
  score: number;
  kind: MemoryKind;
  memory_type?: MemoryType;
  /**
   * Every message the hit covers: a memory's sources, or a transcript hit's message and its
   * neighbours (kept for recall measurements that look for any of them).
   */
  source_ids: string[];
  /** ISO 8601; for a transcript hit, when the matched message was written. */
  created_at: string;
  /** Transcript hits: the id of the message that matched (`content` is its text). */
  message_id?: string;
  /** Transcript hits: who wrote the matched message. */
  author?: string;
  /** Transcript hits: the messages around the match, each on its own, in order. */
  neighbors?: SearchNeighbor[];
}

export interface MemoryRecord {
  id: string;
  kind: MemoryKind;
  content: string;
  memoryType?: MemoryType;
  importance?: number;
  scope: MemoryScopeKind;
  channelId: string;
  guildId?: string;
  sourceIds: string[];
  createdAt: number;
  updatedAt: number;
}

export interface MemoryStats {
  memories: number;
  transcriptEntries: number;
  byType: Partial<Record<MemoryType, number>>;
  embedder: string;
  dimension: number;
  indexedVectors: number;
  pendingVectors: number;
}

export interface MemoryStore {
  save(input: SaveMemoryInput): Promise<SaveMemoryResult>;
  /** Adds archived messages to the searchable transcript; idempotent per message id. */
  archiveTranscript(entries: TranscriptEntryInput[]): Promise<void>;
  /** Messages edited in Discord (or replies that lost a quote): their archived text changes too, in one transaction. */
  updateTranscript(channelId: string, changes: ReadonlyArray<{ messageId: string; content: string }>): Promise<void>;
  /** Messages deleted in Discord leave the archive and every index. */
  deleteTranscript(channelId: string, messageIds: string[]): Promise<void>;
  search(query: SearchQuery): Promise<SearchResult[]>;
  list(options: { location?: MemoryLocation; kind?: MemoryKind; limit?: number }): Promise<MemoryRecord[]>;
  /**
   * Returns false when no such memory exists. With `within`, only an item that belongs to that
   * channel (or, in a DM, to that user) is forgotten: chat commands cannot reach other channels.
   */
  forget(id: string, within?: MemoryLocation): Promise<boolean>;
  stats(location?: MemoryLocation): Promise<MemoryStats>;
  close(): Promise<void>;
  /**
   * Optional: a store that lives in the caller's own database (`db`, the same client) returns a
   * function that writes transcript rows inside the caller's open transaction (awaited there),
   * so that a history row and its searchable copy commit together; undefined when it does not
   * share that database.
   */
  transcriptStager?(db: unknown): ((entries: TranscriptEntryInput[]) => Promise<void>) | undefined;
  /**
   * Optional: the same rows as steps of a script that SQLite's writer thread runs whole (with
   * the caller's history rows), and what to do once it committed; undefined when the store
   * does not share `db` or `db` runs no scripts.
   */
  transcriptScript?(db: unknown): ((entries: TranscriptEntryInput[]) => { steps: ScriptStep[]; committed: () => void }) | undefined;
  /** Optional: the channel was unloaded from memory; its vector index may be saved and dropped. */
  releaseChannel?(channelId: string): Promise<void>;
  /**
   * Messages of a channel are gone (deleted, edited, erased): memories drawn only from them are
   * deleted; the others lose those ids and, with `rewrite`, wait as a marker for the model to
   * restate them from what remains (without it they are deleted too). Returns what was deleted
   * and what waits, with the text each had, so that text can be removed from wherever it was
   * quoted.
   */
  dropSources?(channelId: string, messageIds: readonly string[], options?: SourceDropOptions): Promise<SourceDropResult>;
  /**
   * Ends the wait of a memory flagged by `dropSources`: its new text lands (only while its
   * sources are still `sourceIds`; otherwise `superseded`), or with `delete` it goes.
   */
  finishRewrite?(id: string, outcome: RewriteOutcome): Promise<'rewritten' | 'deleted' | 'superseded' | 'gone'>;
  /** Memories of a channel still waiting for a rewrite (after a restart, too). */
  pendingRewrites?(channelId: string): Promise<PendingRewrite[]>;
  /** What an item id (`mem-12`, `msg-40`) stands for, without its neighbours; undefined if unknown. */
  describeItem?(id: string): Promise<ItemDescription | undefined>;
  /** Who can view a guild channel (guild scope shares memories only between equal views); true if it changed. */
  recordChannelView?(view: ChannelView): Promise<boolean>;
}

export interface SourceDropOptions {
  /** A model can restate memories: those that keep a source wait for it instead of being deleted. */
  rewrite?: boolean;
}

/** A memory that lost a source, kept a marker in place of its text and waits for its rewrite. */
export interface PendingRewrite {
  id: string;
  channelId: string;
  memoryType?: MemoryType;
  /** The messages it is still drawn from. */
  sourceIds: string[];
  /** The text it had (absent when it was already waiting: that text left the store then). */
  content?: string;
}

export type RewriteOutcome = { content: string; sourceIds: readonly string[] } | 'delete';

export interface SourceDropResult {
  /** `sourcesLeft`: how many messages it still rested on (more than 0 only without `rewrite`). */
  deleted: Array<{ id: string; content: string; sourcesLeft: number }>;
  /** Memories that kept a source and now wait for their rewrite (without `rewrite`: none, they are deleted). */
  rewriting: PendingRewrite[];
}

export interface ItemDescription {
  id: string;
  kind: MemoryKind;
  channelId: string;
  /** For a transcript entry: the message it archives. */
  messageId?: string;
  indexKey: string;
  content: string;
}
