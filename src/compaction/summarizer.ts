import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import type { CompactionSettings } from '../config/types.js';
import type { MemoryLocation } from '../memory/types.js';
import type { RestateMemoryRequest } from './memory-restatement.js';

export interface SummarizeRequest {
  channelId: string;
  /** Where memories saved during this compaction belong. */
  location: MemoryLocation;
  /** Earlier summaries folded into this one (roll-up); empty for an ordinary compaction. */
  priorSummaries: SummaryEntry[];
  /** The contiguous oldest range being compacted, in order. */
  entries: HistoryEntry[];
  /**
   * The most the summary's text may cost, in estimated tokens, for the compaction to free
   * `min_tokens_freed`; a longer summary is not landed. Absent: only `summary_max_tokens` applies.
   */
  maxSummaryTokens?: number;
  settings: CompactionSettings;
  /**
   * The model's window and the channel's calibration, so the request leaves the summary its
   * room (`summary_max_tokens` lowered to fit, never below `summary_min_tokens`). Absent: the
   * request asks for `summary_max_tokens` as it is.
   */
  window?: { contextWindow: number; factor: number };
  signal: AbortSignal;
}

export interface SummarizeResult {
  summary: string;
  memoriesSaved: number;
}

/**
 * Turns a range of history into one summary. Implementations: the model (with only
 * `memory_save`) and the offline extractive summarizer. A summarizer throws on failure; it
 * never changes history itself.
 */
export interface Summarizer {
  readonly name: string;
  /** Its requests go to a model whose window bounds the range it can take (the model summarizer). */
  readonly boundedByWindow?: boolean;
  summarize(request: SummarizeRequest): Promise<SummarizeResult>;
  /**
   * Restates a memory from the messages it still rests on, after one it was drawn from was
   * removed; undefined when they support none of it. Only a model can: a summarizer without
   * this method (the extractive one) has memories that lost a source deleted instead.
   */
  restateMemory?(request: RestateMemoryRequest): Promise<string | undefined>;
}
