/**
 * The context window as the real API enforces it: whether a prompt of so many tokens, asking
 * for so many output tokens, is refused, and with which of the API's two messages.
 */
import type { RefusalForm } from './types.js';

/** The refusal a request of `tokens` input asking for `maxTokens` gets, if any, in the real API's words. */
export function refusalFor(tokens: number, maxTokens: number, limits: { contextWindow?: number; maxInputTokens?: number }): { form: RefusalForm; message: string } | undefined {
  const window = limits.contextWindow ?? limits.maxInputTokens;
  if (window === undefined) return undefined;
  if (tokens > window) return { form: 'prompt_too_long', message: `prompt is too long: ${tokens} tokens > ${window} maximum` };
  if (limits.contextWindow !== undefined && tokens + maxTokens > window) {
    return {
      form: 'exceeds_context',
      message: `input length and \`max_tokens\` exceed context limit: ${tokens} + ${maxTokens} > ${window}, decrease input length or \`max_tokens\` and try again`,
    };
  }
  return undefined;
}
