import type { ContentBlock, ModelMessage } from '../llm/chat-model.js';
import { estimateTokens } from '../context/token-estimate.js';

/** Marks the note that says how much was dropped, so a later trim replaces it. */
const DROPPED_NOTE_PREFIX = '(To make room, ';

/** What a worker's conversation costs: its JSON at the channel's 4 characters per token. */
export function estimateConversation(messages: readonly ModelMessage[], fixedTokens: number): number {
  return fixedTokens + estimateTokens(JSON.stringify(messages));
}

export interface TrimResult {
  messages: ModelMessage[];
  /** Tool calls dropped by this trim (each with its result). */
  droppedCalls: number;
  /** Model turns dropped by this trim. */
  droppedTurns: number;
}

/**
 * Drops the oldest model turns of a worker's conversation until it fits `targetTokens`,
 * without a model call. The first message (the task statement) always stays, and so do the
 * newest `keepTurns` turns. A turn is the model's message and the tool results that answer
 * it, dropped together: a tool_use never stays without its tool_result, or the reverse.
 */
export function trimWorkerHistory(
  messages: readonly ModelMessage[],
  options: { targetTokens: number; fixedTokens: number; keepTurns: number; totalDroppedCalls: number },
): TrimResult {
  const [head, ...rest] = messages;
  if (!head) return { messages: [], droppedCalls: 0, droppedTurns: 0 };
  const turns: ModelMessage[][] = [];
  for (let index = 0; index < rest.length; index += 1) {
    const message = rest[index]!;
    const next = rest[index + 1];
    if (message.role === 'assistant' && next?.role === 'user') {
      turns.push([message, next]);
      index += 1;
    } else {
      turns.push([message]);
    }
  }
  let total = estimateConversation(messages, options.fixedTokens);
  let droppedCalls = 0;
  let droppedTurns = 0;
  while (total > options.targetTokens && turns.length > options.keepTurns) {
    const turn = turns.shift()!;
    total -= estimateTokens(JSON.stringify(turn));
    droppedTurns += 1;
    droppedCalls += turn.reduce((count, message) => count + blocksOf(message).filter((block) => block.type === 'tool_use').length, 0);
  }
  if (droppedTurns === 0) return { messages: [...messages], droppedCalls: 0, droppedTurns: 0 };
  const dropped = options.totalDroppedCalls + droppedCalls;
  const note: ContentBlock = {
    type: 'text',
    text: `${DROPPED_NOTE_PREFIX}your ${dropped} oldest tool call${dropped === 1 ? '' : 's'} and their results were dropped from this conversation. Save what matters with memory_save as you go; memory_search and channel_history can find things again.)`,
  };
  const headBlocks = blocksOf(head).filter((block) => !(block.type === 'text' && block.text.startsWith(DROPPED_NOTE_PREFIX)));
  // The turn after the head must be the model's, so roles keep alternating.
  while (turns.length > 0 && turns[0]![0]!.role !== 'assistant') {
    const turn = turns.shift()!;
    droppedTurns += 1;
    droppedCalls += turn.reduce((count, message) => count + blocksOf(message).filter((block) => block.type === 'tool_use').length, 0);
  }
  return { messages: [{ role: 'user', content: [...headBlocks, note] }, ...turns.flat()], droppedCalls, droppedTurns };
}

function blocksOf(message: ModelMessage): ContentBlock[] {
  return typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
}
