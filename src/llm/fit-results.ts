import type { ModelMessage, ToolResultBlock } from './chat-model.js';
import { shortenToolResult } from './shorten-result.js';

/**
 * Keeps one turn's requests inside the model's window while tool results pile up. Tokens are in
 * the caller's estimate units (the channel's 4-characters-per-token estimate).
 */
export interface ToolLoopBudget {
  /** Estimate of the first request (system prompt, tools, conversation). */
  startTokens: number;
  /**
   * The most a request may be estimated at (the window less the answer's room, corrected); a
   * function of the tool calls and results appended so far when the caller corrects them apart.
   */
  maxTokens: number | ((toolTokens: number) => number);
  /** Estimate of one message the loop appends. */
  estimate(message: ModelMessage): number;
  /**
   * The part of `estimate(message)` that is tool calls and results, when the caller corrects
   * them apart (they tokenize otherwise than prose); the loop's running total of it is passed
   * with each request's estimate as `toolTokens`.
   */
  toolEstimate?(message: ModelMessage): number;
}

/** Put in place of a tool result dropped to keep the request inside the window. */
export const DROPPED_RESULT = 'result dropped: the context window is full; answer with what you have';

/** The most a request may be estimated at, given the tool calls and results appended so far. */
export function ceilingOf(budget: ToolLoopBudget, toolTokens: number): number {
  return typeof budget.maxTokens === 'function' ? budget.maxTokens(toolTokens) : budget.maxTokens;
}

/**
 * Brings a request back inside the budget by shortening or dropping the tool results the loop
 * appended (`messages`, changed in place), oldest first: the latest ones are what the model asked
 * for last. A result is cut to the most of it that lets the request fit when it can be (see
 * `shorten-result.ts`), else replaced by `DROPPED_RESULT`, and the next one is looked at. Only a
 * result's text changes, so each stays paired with its call. Sizes are the budget's own estimate
 * of the whole message, the same that `totals` were summed from.
 */
export function fitResults(
  messages: readonly ModelMessage[],
  totals: { estimatedTokens: number; toolTokens: number },
  budget: ToolLoopBudget,
): { estimatedTokens: number; toolTokens: number; dropped: number; shortened: number } {
  let { estimatedTokens, toolTokens } = totals;
  let dropped = 0;
  let shortened = 0;
  const toolPart = (message: ModelMessage): number => budget.toolEstimate?.(message) ?? 0;
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (let index = 0; typeof message.content !== 'string' && index < message.content.length; index += 1) {
      if (estimatedTokens <= ceilingOf(budget, toolTokens)) return { estimatedTokens, toolTokens, dropped, shortened };
      const blocks = message.content;
      const block = blocks[index]!;
      if (block.type !== 'tool_result' || block.content === DROPPED_RESULT) continue;
      const before = budget.estimate(message);
      const toolsBefore = toolPart(message);
      const withResult = (result: ToolResultBlock): ModelMessage => ({ ...message, content: blocks.map((other, at) => (at === index ? result : other)) });
      const sizes = (candidate: ModelMessage): { estimatedTokens: number; toolTokens: number } => ({
        estimatedTokens: estimatedTokens + budget.estimate(candidate) - before,
        toolTokens: toolTokens + toolPart(candidate) - toolsBefore,
      });
      const fits = (text: string): boolean => {
        const size = sizes(withResult({ ...block, content: text }));
        return size.estimatedTokens <= ceilingOf(budget, size.toolTokens);
      };
      // An error is short and says what went wrong: it is kept whole or dropped, never cut.
      const cut = block.is_error ? undefined : shortenToolResult(block.content, fits);
      const replaced = withResult(cut === undefined ? { ...block, content: DROPPED_RESULT, is_error: true } : { ...block, content: cut });
      // A result no longer than the note that would replace it (a save's `{id, status}`) frees
      // nothing: it stays, so the model is not told that a call which worked failed.
      if (cut === undefined && budget.estimate(replaced) >= before) continue;
      if (cut === undefined) dropped += 1;
      else shortened += 1;
      ({ estimatedTokens, toolTokens } = sizes(replaced));
      message.content = replaced.content;
    }
  }
  return { estimatedTokens, toolTokens, dropped, shortened };
}
