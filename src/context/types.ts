import type { ModelUsage } from '../llm/chat-model.js';
/**
 * The shapes shared by the channel runtime, compaction, the adapters (Discord, console) and
 * replay.
 */

export type EntryKind = 'message' | 'tool_call' | 'tool_result';

/** One entry of a channel's history, as appended (and archived forever, until deleted). */
export interface HistoryEntry {
  /** Monotonic per channel, assigned on append; order of the history. */
  seq: number;
  channelId: string;
  /** Platform message id (Discord snowflake, transcript id) or a generated one. */
  messageId: string;
  kind: EntryKind;
  role: 'user' | 'assistant';
  authorId: string;
  authorName: string;
  /** Text; for tool calls and results, JSON of the block. */
  content: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** Estimated once, on append (4 characters per token plus fixed framing). */
  tokens: number;
  /** Entries of one turn (a message, the tool calls it caused, the reply) are never split. */
  turnId: number;
}

/** A summary (or truncation marker) standing at the head of the live context for a range. */
export interface SummaryEntry {
  id: number;
  channelId: string;
  kind: 'summary' | 'marker';
  /** First and last history seq it stands for. */
  fromSeq: number;
  toSeq: number;
  content: string;
  tokens: number;
  createdAt: number;
}

/** A message arriving from a platform (Discord, the terminal, a transcript line). */
export interface IncomingMessage {
  messageId: string;
  channelId: string;
  guildId?: string;
  /** Set for DMs: the user the DM belongs to. */
  dmUserId?: string;
  /** For a thread: the channel it hangs off, whose per-channel settings it inherits. */
  parentChannelId?: string;
  authorId: string;
  authorName: string;
  /** 'assistant' for the bot's own messages seen in a transcript. */
  role: 'user' | 'assistant';
  /** Text as the model should read it (mentions resolved, attachments as placeholders). */
  content: string;
  /** The platform id of the message this one replies to (its text is looked up, not copied). */
  replyToMessageId?: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
}

/** What `/context` shows. */
export interface ContextStatus {
  channelId: string;
  /** The 4-characters-per-token estimate of what the model is sent. */
  estimatedTokens: number;
  contextWindow: number;
  /** `contextWindow − maxResponseTokens`: the answer's room is reserved. */
  usableWindow: number;
  /**
   * The channel's correction factor, learnt from the model's counts (1 with no observation yet),
   * and its parts once learnt: the messages' factor and the tool calls' and results' correction
   * (a multiple of the messages' factor; see `Calibration`).
   */
  calibration: { factor: number; observations: number; messageFactor?: number; toolFactor?: number };
  /** The estimate corrected by the calibration (its parts, once learnt). */
  calibratedTokens: number;
  /** calibratedTokens / usableWindow, in [0, ∞). */
  usage: number;
  thresholds: { background: number; aggressive: number; emergency: number };
  liveMessages: number;
  summaries: number;
  archivedMessages: number;
  compactionRunning: boolean;
  /** `manual` is `/compact`. */
  lastCompaction?: { tier: 'background' | 'aggressive' | 'emergency' | 'manual'; at: number; messages: number };
  /** The channel's last model request since this process loaded it, as the model counted it. */
  lastRequest?: { at: number; usage: ModelUsage };
}
