import { IMAGE_TOKEN_CAP } from './image-tokens.js';
import type { ModelMessage } from '../llm/chat-model.js';
import type { HistoryEntry } from './types.js';

/** Characters per token: the cheap estimate the Compactor relies on. */
export const CHARS_PER_TOKEN = 4;
/** Role and speaker framing the model sees around every message. */
export const MESSAGE_FRAMING_TOKENS = 4;
/** The most a resolved reply quote adds (120 characters, see `src/privacy/reply-reference.ts`). */
export const REPLY_QUOTE_TOKENS = 30;
/** Tool calls and results carry block structure (ids, names, JSON) beyond their text. */
export const TOOL_BLOCK_TOKENS = 20;

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

const WIDE_SCRIPT = /[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]/u;

/**
 * A closer count for text that is counted rarely (the system prompt and tool definitions, when
 * they change): about one token per Chinese, Japanese or Korean character, one per 4 other
 * characters. Messages keep the plain estimate, corrected by the channel's factor.
 */
export function estimateFixedTokens(text: string): number {
  let wide = 0;
  let other = 0;
  for (const char of text) {
    if (WIDE_SCRIPT.test(char)) wide += 1;
    else other += 1;
  }
  return wide + Math.ceil(other / CHARS_PER_TOKEN);
}

/** Computed once per entry, on append; the running totals add these up. */
export function estimateEntryTokens(entry: Pick<HistoryEntry, 'kind' | 'authorName' | 'content'>): number {
  if (entry.kind === 'message') {
    // A reply is stored as a reference; the quote it becomes in each request is counted here.
    const quote = entry.content.startsWith('(replying to ') ? REPLY_QUOTE_TOKENS : 0;
    return estimateTokens(entry.authorName) + estimateTokens(entry.content) + MESSAGE_FRAMING_TOKENS + quote;
  }
  return estimateTokens(entry.content) + TOOL_BLOCK_TOKENS;
}

/**
 * A message appended inside a turn's tool loop, counted the way its entries will be once the
 * turn is stored: text as a message, tool calls and results as their blocks' JSON.
 */
export function estimateMessageTokens(message: ModelMessage): number {
  if (typeof message.content === 'string') return estimateTokens(message.content) + MESSAGE_FRAMING_TOKENS;
  let total = 0;
  for (const block of message.content) {
    // An image is counted by the provider's rule, never as the length of its base64 text.
    if (block.type === 'image') total += IMAGE_TOKEN_CAP;
    else total += block.type === 'text' ? estimateTokens(block.text) + MESSAGE_FRAMING_TOKENS : estimateTokens(JSON.stringify(block)) + TOOL_BLOCK_TOKENS;
  }
  return total;
}

/**
 * The part of `estimateMessageTokens` that is tool calls and results (their blocks' JSON): what
 * the tools' own correction applies to.
 */
export function estimateToolBlockTokens(message: ModelMessage): number {
  if (typeof message.content === 'string') return 0;
  let total = 0;
  for (const block of message.content) {
    if (block.type === 'tool_use' || block.type === 'tool_result') total += estimateTokens(JSON.stringify(block)) + TOOL_BLOCK_TOKENS;
  }
  return total;
}
