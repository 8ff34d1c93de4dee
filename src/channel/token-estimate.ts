import type { HistoryEntry } from './types.js';

/** Characters per token: the cheap estimate the Compactor relies on. */
export const CHARS_PER_TOKEN = 4;
/** Role and speaker framing the model sees around every message. */
export const MESSAGE_FRAMING_TOKENS = 4;
/** Tool calls and results carry block structure (ids, names, JSON) beyond their text. */
export const TOOL_BLOCK_TOKENS = 20;

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Computed once per entry, on append; the running totals add these up. */
export function estimateEntryTokens(entry: Pick<HistoryEntry, 'kind' | 'authorName' | 'content'>): number {
  if (entry.kind === 'message') {
    return estimateTokens(entry.authorName) + estimateTokens(entry.content) + MESSAGE_FRAMING_TOKENS;
  }
  return estimateTokens(entry.content) + TOOL_BLOCK_TOKENS;
}
