import type { BudgetUnit } from '../config/types.js';
import type { ModelUsage } from './chat-model.js';

export type { BudgetUnit };

/**
 * What the prompt cache does to the price of input, as multiples of the plain input price
 * (Anthropic's published rates): a read costs a tenth, a write a quarter more with the
 * five-minute lifetime, twice as much with the one-hour lifetime.
 */
export const CACHE_READ_WEIGHT = 0.1;
export const CACHE_WRITE_5M_WEIGHT = 1.25;
export const CACHE_WRITE_1H_WEIGHT = 2;

/**
 * The real size of the request a response answered: uncached input, plus what was written to
 * and read from the cache. This, not `inputTokens` alone, is what the context window holds, so
 * calibration, overflow handling, budgets and metrics count it.
 */
export function wholeInputTokens(usage: ModelUsage): number {
  return usage.inputTokens + (usage.cacheWriteTokens ?? 0) + (usage.cacheReadTokens ?? 0);
}

/** Input as billed, in plain-input-token equivalents: what the cache saved or cost shows here. */
export function billedInputTokens(usage: ModelUsage): number {
  const write1h = Math.min(usage.cacheWrite1hTokens ?? 0, usage.cacheWriteTokens ?? 0);
  const write5m = (usage.cacheWriteTokens ?? 0) - write1h;
  return usage.inputTokens + CACHE_WRITE_5M_WEIGHT * write5m + CACHE_WRITE_1H_WEIGHT * write1h + CACHE_READ_WEIGHT * (usage.cacheReadTokens ?? 0);
}

/** Share of the request read from the cache, in [0, 1]; 0 for an empty usage. */
export function cachedShare(usage: ModelUsage): number {
  const whole = wholeInputTokens(usage);
  return whole > 0 ? (usage.cacheReadTokens ?? 0) / whole : 0;
}

/** What a call costs a daily budget in its unit: input (whole or billed) plus output. */
export function budgetTokens(usage: ModelUsage, unit: BudgetUnit): number {
  return (unit === 'billed' ? billedInputTokens(usage) : wholeInputTokens(usage)) + usage.outputTokens;
}

/** Adds `usage` into `total` (every part, so sums of calls keep their cache split). */
export function addUsage(total: ModelUsage, usage: ModelUsage): ModelUsage {
  total.inputTokens += usage.inputTokens;
  total.outputTokens += usage.outputTokens;
  if (usage.cacheWriteTokens) total.cacheWriteTokens = (total.cacheWriteTokens ?? 0) + usage.cacheWriteTokens;
  if (usage.cacheWrite1hTokens) total.cacheWrite1hTokens = (total.cacheWrite1hTokens ?? 0) + usage.cacheWrite1hTokens;
  if (usage.cacheReadTokens) total.cacheReadTokens = (total.cacheReadTokens ?? 0) + usage.cacheReadTokens;
  return total;
}

/**
 * The input numbers an event carries: the request's whole input, how much of it the cache
 * wrote and read, and what it is billed as (rounded: logs want whole tokens).
 */
export function usageFields(usage: ModelUsage): { input_tokens: number; cache_write_tokens: number; cache_read_tokens: number; billed_input_tokens: number } {
  return {
    input_tokens: wholeInputTokens(usage),
    cache_write_tokens: usage.cacheWriteTokens ?? 0,
    cache_read_tokens: usage.cacheReadTokens ?? 0,
    billed_input_tokens: Math.round(billedInputTokens(usage)),
  };
}
