import { withoutNul } from '../common/outside-text.js';
import type { ChatModel } from '../llm/chat-model.js';
import { abortedModelError, ModelError } from '../llm/model-error.js';

/** A memory to restate without a message it was drawn from, which is gone. */
export interface RestateMemoryRequest {
  channelId: string;
  memoryType?: string;
  /** The memory as it read, with what it quoted of the removed message already taken out. */
  memory: string;
  /** The messages it is still drawn from, oldest first (never the removed one). */
  sources: ReadonlyArray<{ authorName: string; content: string }>;
  signal: AbortSignal;
}

/** What the model answers when the remaining messages support nothing of the memory. */
const NOTHING_LEFT = 'NONE';

/** A restated memory is a sentence or two; this leaves room and bounds a runaway answer. */
const MAX_RESTATE_TOKENS = 400;

export const MEMORY_RESTATE_SYSTEM_PROMPT = [
  'You maintain the long-term memory of a chat bot. One of the messages a saved memory was drawn',
  'from has been deleted or changed by its author, and nothing of it may be kept. You get the',
  'memory as it was written and the messages it still rests on.',
  '',
  'Write the memory again so that it states only what those remaining messages support: keep',
  'names, numbers and identifiers they contain exactly, drop every detail they do not contain,',
  'even when the memory states it, and add nothing of your own. Answer with the new memory text',
  `alone, one or two sentences, without a preamble. If the remaining messages support none of it, answer ${NOTHING_LEFT}.`,
].join('\n');

/**
 * Asks the model to restate a memory from its remaining sources. Resolves with the new text,
 * or undefined when nothing of it is supported any more; throws a `ModelError` when the model
 * fails (the caller then deletes the memory rather than keep what it cannot vouch for).
 */
export async function restateMemory(model: ChatModel, request: RestateMemoryRequest): Promise<string | undefined> {
  const { signal } = request;
  if (signal.aborted) throw abortedModelError(signal);
  const lines = [
    `Memory (${request.memoryType ?? 'fact'}):`,
    request.memory,
    '',
    'Messages it still rests on:',
    ...request.sources.map((source) => `${source.authorName}: ${source.content}`),
  ];
  let text: string;
  try {
    const response = await model.createMessage(
      { system: MEMORY_RESTATE_SYSTEM_PROMPT, messages: [{ role: 'user', content: lines.join('\n') }], maxTokens: MAX_RESTATE_TOKENS },
      { signal, purpose: 'compaction' },
    );
    // Stored as the memory's text: U+0000 replaced as in every text that reaches the store.
    text = withoutNul(response.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('')).trim();
  } catch (error) {
    if (signal.aborted) throw abortedModelError(signal);
    throw error;
  }
  if (text === '') {
    throw new ModelError('bad_response', 'the model returned an empty memory', { retryable: true, context: { channelId: request.channelId } });
  }
  return text === NOTHING_LEFT ? undefined : text;
}
