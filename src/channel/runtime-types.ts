import type { ChangeFeed, StoreChange } from '../common/change-feed.js';
import type { Clock } from '../common/clock.js';
import type { EventStream } from '../common/events.js';
import type { LiveConfig } from '../config/live-config.js';
import type { ChannelSettings } from '../config/types.js';
import type { ToolDefinition } from '../llm/chat-model.js';
import type { MemoryStore } from '../memory/types.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { CompactionCoordinator } from '../compaction/coordinator.js';
import type { CompactionScheduler } from '../compaction/scheduler.js';
import type { Summarizer } from '../compaction/summarizer.js';
import type { ChannelState } from '../context/channel-state.js';
import type { EntryExtras } from './entry-extras.js';
import type { HistoryStore } from './history-store.js';
import type { IngestWriter } from './ingest-writer.js';
import type { ChannelLocks } from '../storage/channel-locks.js';
import type { TranscriptArchiver } from './transcript-archiver.js';
import type { EntryKind, HistoryEntry, SummaryEntry } from '../context/types.js';

export interface ChannelRuntimeOptions {
  db: SqlClient;
  /** Who may compact a channel when processes share the store (the app builds them for PostgreSQL). */
  locks?: ChannelLocks;
  memory: MemoryStore;
  config: LiveConfig;
  events: EventStream;
  /** Writes compaction summaries (the model, or the extractive summarizer offline). */
  summarizer: Summarizer;
  /** Stands in after repeated failures; default: the extractive summarizer. */
  fallbackSummarizer?: Summarizer;
  clock?: Clock;
  /** The tools the channel agent offers; counted in every usage estimate. */
  toolDefinitions?: ToolDefinition[];
  /** When finished workers land; default: as soon as they finish. */
  scheduler?: CompactionScheduler;
  /** Sees what no event reports because it happens too often to log (metrics). */
  observer?: RuntimeObserver;
  /** Sees usage at every check, and what the estimate counted (the compaction log). */
  usageObserver?: EstimateObserver;
  /** How often transcript writes that failed are sent again, in ms (0: only before compaction). Default 30 s. */
  archiveRepairIntervalMs?: number;
  /**
   * Other processes serving the same store (PostgreSQL): what they change in a loaded channel is
   * read back, and what this runtime changes is published. Default: none (SQLite, one process).
   */
  changes?: ChangeFeed;
}

/** Hooks for high-frequency facts; each must be cheap: they run on every message. */
export interface RuntimeObserver {
  /** A platform message was appended (a duplicate id is not). */
  messageIngested?(): void;
  /** The usage one Compactor check saw (the same number it compares with the thresholds). */
  usageChecked?(usage: number): void;
}

/**
 * Watches usage at each check (the compaction log), with the tokens of the tool definitions the
 * estimate counted: `magpie status` reads them back to count as this runtime did. Must stay
 * cheap: it runs after every message.
 */
export interface EstimateObserver {
  observe(state: ChannelState, usage: number, estimatedTokens: number, settings: ChannelSettings, toolTokens: number): void;
}

/** What a model request of a channel is estimated at, and how the estimate is corrected there. */
export interface RequestEstimate {
  /** The 4-characters-per-token estimate of what `buildModelRequest` sends now. */
  estimatedTokens: number;
  /** The channel's correction factor (1 until a model has answered). */
  factor: number;
  /** `context_window − max_response_tokens`, in real tokens: no request may go above it. */
  usableWindow: number;
}

/** An entry the channel agent adds to its turn (tool calls, tool results, its reply). */
export interface TurnEntryInput {
  kind: EntryKind;
  role: 'user' | 'assistant';
  authorId: string;
  authorName: string;
  /** Text; for a tool call the JSON of its `tool_use` block, for a result of its `tool_result` block. */
  content: string;
  /** The platform id of a posted reply; generated when absent. */
  messageId?: string;
  /** Tokens of what travels with the entry besides its text (reply context); counted once. */
  extraTokens?: number;
}

/** What erasing a user removed, in counts. */
export interface UserErasure {
  channels: number;
  messages: number;
  memoriesDeleted: number;
  memoriesUpdated: number;
  summariesChanged: number;
  toolEntriesRedacted: number;
}

/** What the model would be sent now, in parts. */
export interface LiveContext {
  summaries: SummaryEntry[];
  entries: HistoryEntry[];
  estimatedTokens: number;
}

/** What the runtime's parts (ingest, message changes) share: stores, writers, the coordinator. */
export interface RuntimeParts {
  readonly options: ChannelRuntimeOptions;
  readonly clock: Clock;
  readonly store: HistoryStore;
  readonly extras: EntryExtras;
  readonly writer: IngestWriter;
  readonly archiver: TranscriptArchiver;
  readonly coordinator: CompactionCoordinator;
  readonly scheduler: CompactionScheduler;
  /** Thread id → parent channel id, learnt from ingested messages; threads inherit settings. */
  readonly parents: Map<string, string>;
  /** Resolves once the messages of the channel that came in so far are in its context (never rejects). */
  admitted(channelId: string): Promise<void>;
  /** The channel's state, loaded if needed. */
  channel(channelId: string): Promise<ChannelState>;
  /** The channel's state if it is loaded (marked as used), else undefined. */
  loaded(channelId: string): ChannelState | undefined;
  /** The channel's settings now: its config (or its parent's), its persona. */
  settings(channelId: string): ChannelSettings;
  /** The most estimated tokens one message of the channel may cost in a request (see `messageCap`). */
  messageCap(state: ChannelState): number;
  /** Tells other processes on the same store what changed (after the write committed); never throws. */
  publish(change: StoreChange): void;
}
