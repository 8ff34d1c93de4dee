import type { ModelMessage, ToolDefinition } from './chat-model.js';
import { ModelError } from './model-error.js';

/**
 * The model's window as one request sees it: the input and the answer it asks for must fit in
 * it together (the server refuses `input + max_tokens > window`). Tokens here are real ones,
 * the server's count, not the 4-characters-per-token estimate.
 */
export interface AnswerRoom {
  /** The model's context window. */
  contextWindow: number;
  /** The smallest `max_tokens` still worth an answer; a request that cannot leave it is not sent. */
  minTokens: number;
  /**
   * The request's input in real tokens, as well as it is known before sending (the estimate,
   * corrected by calibration, with a margin). `estimatedTokens` is the loop's running estimate
   * when it keeps one (0 otherwise).
   */
  inputTokens(request: { system: string; messages: readonly ModelMessage[]; tools?: readonly ToolDefinition[] }, estimatedTokens: number): number;
  /** The server refused a request the room sized (its numbers are on the error): calibration learns from them. */
  onRefusal?(error: ModelError, estimatedTokens: number): void;
}

/**
 * The `max_tokens` a request may ask for: what it wants, lowered to what the window leaves
 * beside its input. Throws a context-overflow `ModelError` (nothing is sent) when even the floor
 * does not fit, so that the caller shrinks the input the way it would after a server's refusal.
 */
export function fitAnswer(
  room: AnswerRoom,
  request: { system: string; messages: readonly ModelMessage[]; tools?: readonly ToolDefinition[]; maxTokens: number },
  estimatedTokens: number,
): number {
  const input = Math.ceil(room.inputTokens(request, estimatedTokens));
  const left = room.contextWindow - input;
  const floor = Math.min(room.minTokens, request.maxTokens);
  if (left >= request.maxTokens) return request.maxTokens;
  if (left >= floor) return left;
  throw new ModelError(
    'context_overflow',
    `request not sent: its input (about ${input} tokens) leaves ${Math.max(0, left)} of the ${room.contextWindow}-token window for the answer, less than the ${floor} it needs`,
    { contextOverflow: true, overflow: {}, context: { estimatedInputTokens: input, contextWindow: room.contextWindow, minAnswerTokens: floor } },
  );
}
