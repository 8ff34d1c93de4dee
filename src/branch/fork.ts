import type { ContentBlock, ModelMessage } from '../llm/chat-model.js';
import { buildMessages, buildSystemPrompt, systemBreaksOf } from '../channel/model-request.js';
import { estimateSummaryTokens } from '../context/summary-text.js';
import { estimateTokens } from '../context/token-estimate.js';
import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { BRANCH_QUESTION_PREFIX, setAsideNote } from './branch-prompt.js';

/** The channel's live context as copied when the branch started, minus what was set aside. */
export interface Fork {
  summaries: readonly SummaryEntry[];
  entries: readonly HistoryEntry[];
  /** Entries and summaries set aside so far to make room (they stay searchable). */
  setAsideEntries: number;
  setAsideSummaries: number;
}

/**
 * Tokens the fork costs as the channel counts them: summaries and entries by their estimates
 * made on append, plus `fixedTokens` (system prompt, tool definitions, question).
 */
export function forkTokens(fork: Fork, fixedTokens: number): number {
  let total = fixedTokens;
  for (const summary of fork.summaries) total += summary.tokens > 0 ? summary.tokens : estimateSummaryTokens(summary);
  for (const entry of fork.entries) total += entry.tokens;
  return total;
}

/**
 * Sets aside the oldest part of the fork until it fits `targetTokens`, without a model call:
 * oldest entries first (a tool call always leaves with its result, so no cut separates them),
 * then the oldest summaries. The newest entry (the message being answered) always stays.
 */
export function compactFork(fork: Fork, fixedTokens: number, targetTokens: number): Fork {
  const entries = [...fork.entries];
  const summaries = [...fork.summaries];
  let total = forkTokens(fork, fixedTokens);
  let droppedEntries = 0;
  let droppedSummaries = 0;
  while (total > targetTokens && entries.length > 1) {
    let cut = 1;
    // Tool results follow their call; never leave one at the head without its call.
    while (cut < entries.length - 1 && entries[cut]!.kind === 'tool_result') cut += 1;
    for (const entry of entries.splice(0, cut)) total -= entry.tokens;
    droppedEntries += cut;
  }
  while (total > targetTokens && summaries.length > 0) {
    const summary = summaries.shift()!;
    total -= summary.tokens > 0 ? summary.tokens : estimateSummaryTokens(summary);
    droppedSummaries += 1;
  }
  return {
    summaries,
    entries,
    setAsideEntries: fork.setAsideEntries + droppedEntries,
    setAsideSummaries: fork.setAsideSummaries + droppedSummaries,
  };
}

/** The system prompt and messages a branch sends for a fork: the channel's own rendering, then the question. */
export function forkRequest(fork: Fork, systemPrompt: string, question: string): { system: string; systemBreaks: number[]; messages: ModelMessage[] } {
  const note = fork.setAsideEntries + fork.setAsideSummaries > 0 ? setAsideNote(fork.setAsideEntries, fork.setAsideSummaries) : '';
  const system = buildSystemPrompt(systemPrompt + note, fork.summaries);
  const messages = buildMessages(fork.entries);
  const questionBlock: ContentBlock = { type: 'text', text: `${BRANCH_QUESTION_PREFIX}${question}` };
  const last = messages.at(-1);
  // The fork usually ends with the message being answered: the question joins that user
  // message as its last block, so roles keep alternating.
  if (last && last.role === 'user') {
    last.content = typeof last.content === 'string' ? [{ type: 'text', text: last.content }, questionBlock] : [...last.content, questionBlock];
  } else {
    messages.push({ role: 'user', content: [questionBlock] });
  }
  return { system, systemBreaks: systemBreaksOf(systemPrompt + note, fork.summaries), messages };
}

/** What the branch's own instructions and question cost before any history. */
export function fixedTokensOf(systemPrompt: string, question: string, toolTokens: number): number {
  return estimateTokens(systemPrompt) + estimateTokens(BRANCH_QUESTION_PREFIX + question) + toolTokens + 200;
}
