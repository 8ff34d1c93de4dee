/**
 * The compaction events, as typed shapes. They carry ids and numbers only, never message
 * content; the application logs them, `magpie replay --json` prints them.
 */
export type CompactionTier = 'background' | 'aggressive' | 'emergency' | 'manual';

interface ChannelEvent {
  channel_id: string;
  [field: string]: unknown;
}

export interface CompactionTriggeredEvent extends ChannelEvent {
  type: 'compaction_triggered';
  action: CompactionTier;
  tier: CompactionTier;
  usage: number;
  /** The 4-characters-per-token estimate, before calibration. */
  estimated_tokens: number;
  context_window: number;
  /** `context_window − max_response_tokens`: what the thresholds apply to. */
  usable_window: number;
  /** The channel's correction factor (1 until a model has answered). */
  calibration_factor: number;
  /** `calibration_factor × estimated_tokens`, the figure usage is computed from. */
  calibrated_tokens: number;
  live_messages: number;
}

export interface CompactionStartedEvent extends ChannelEvent {
  type: 'compaction_started';
  compaction_id: string;
  tier: CompactionTier;
  messages: number;
  /** Messages before the cut left live with their replies, past it (overlapping turns); 0 for a clean cut. */
  messages_held: number;
  summaries_folded: number;
  from_seq: number;
  to_seq: number;
  summarizer: string;
}

export interface CompactionCompletedEvent extends ChannelEvent {
  type: 'compaction_completed';
  compaction_id: string;
  tier: CompactionTier;
  messages_compacted: number;
  summaries_folded: number;
  replaced_marker: boolean;
  tokens_before: number;
  tokens_after: number;
  tokens_freed: number;
  summary_tokens: number;
  memories_saved: number;
  duration_ms: number;
  summarizer: string;
}

export interface CompactionFailedEvent extends ChannelEvent {
  type: 'compaction_failed';
  compaction_id: string;
  tier: CompactionTier;
  reason: string;
  consecutive_failures: number;
  summarizer: string;
  duration_ms: number;
}

export interface CompactionReplannedEvent extends ChannelEvent {
  type: 'compaction_replanned';
  compaction_id: string;
  tier: CompactionTier;
  reason: string;
}

/**
 * A tier not acted on: a worker tier when another process holds the channel's compaction lock
 * (shared store); emergency truncation when only the turn being answered is live.
 */
export interface CompactionSkippedEvent extends ChannelEvent {
  type: 'compaction_skipped';
  tier: CompactionTier;
  reason: string;
}

export interface EmergencyTruncationEvent extends ChannelEvent {
  type: 'emergency_truncation';
  marker_id: number;
  messages_dropped: number;
  tokens_freed: number;
  usage_before: number;
  usage_after: number;
  calibration_factor: number;
  /** A worker was running and was pre-empted (not cancelled). */
  preempted_worker: boolean;
  /** Folded into the newest marker (back-to-back truncations) rather than adding one. */
  merged_into_marker: boolean;
  /** Time the truncation took inside the turn, in milliseconds (fractional). */
  duration_ms: number;
}

export interface ArchiveFailedEvent extends ChannelEvent {
  type: 'archive_failed';
  messages: number;
  reason: string;
}

export type CompactionEvent =
  | CompactionTriggeredEvent
  | CompactionStartedEvent
  | CompactionCompletedEvent
  | CompactionFailedEvent
  | CompactionReplannedEvent
  | CompactionSkippedEvent
  | EmergencyTruncationEvent
  | ArchiveFailedEvent;
