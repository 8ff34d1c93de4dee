import { estimateTokens } from './token-estimate.js';
import type { SummaryEntry } from './types.js';

/** Introduces the stacked summaries in the system prompt. */
export const SUMMARY_HEADER =
  '\n\nEarlier parts of this conversation, oldest first (the full text can be recalled with memory_search):\n';
export const SUMMARY_HEADER_TOKENS = estimateTokens(SUMMARY_HEADER);

export function renderSummary(summary: Pick<SummaryEntry, 'kind' | 'fromSeq' | 'toSeq' | 'content'>): string {
  return `[${summary.kind} of messages ${summary.fromSeq}-${summary.toSeq}]\n${summary.content}`;
}

/** Counted once per summary, like entries: its rendering plus the blank line between. */
export function estimateSummaryTokens(summary: Pick<SummaryEntry, 'kind' | 'fromSeq' | 'toSeq' | 'content'>): number {
  return estimateTokens(renderSummary(summary)) + 1;
}
