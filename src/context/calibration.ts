import type { ChannelSettings } from '../config/types.js';

export { overflowNumbers } from '../llm/overflow-numbers.js';

/**
 * Calibration of the 4-characters-per-token estimate against the model's own count.
 *
 * The estimate stays what the design says (characters / 4, counted once per message, running
 * totals), so a check is O(1). Every model response reports `usage.input_tokens` for the
 * request it answered; the ratio between that and the estimate of the same request is the
 * channel's correction factor, smoothed so that one odd request does not swing it, and bounded
 * so that a broken server cannot make a channel compact on every message or never. Thresholds
 * apply to `factor × estimate`.
 */
export const CALIBRATION = Object.freeze({
  /** Smallest and largest factor taken (Latin prose sits near 1, CJK near 4, dense code 1–2). */
  min: 0.25,
  max: 8,
  /** Weight of a new observation once the first one has set the factor. */
  smoothing: 0.3,
  /**
   * The most one later observation moves the factor (a ratio): a request the server counted
   * very differently from the rest (an odd image, a huge tool result) nudges it, never throws it.
   */
  maxStep: 1.15,
  /** Requests estimated below this are too small to say anything (fixed overheads dominate). */
  minEstimate: 64,
  /**
   * Added to a calibrated estimate where a request is sized against the window's edge
   * (`input + max_tokens ≤ context_window`): right after a compaction changes the mix of a
   * channel's text, the factor trails the real count by a few percent.
   */
  margin: 0.04,
});

/** Real tokens to plan for, for a request estimated at `estimatedTokens`: calibrated, with the margin. */
export function plannedInputTokens(estimatedTokens: number, factor: number): number {
  return Math.ceil(estimatedTokens * factor * (1 + CALIBRATION.margin));
}

/** A channel's correction factor; `observations` 0 means no model has answered yet (factor 1). */
export interface Calibration {
  factor: number;
  observations: number;
  /**
   * The factor of the channel's messages alone: the request's real count less its fixed part
   * (system prompt, tool definitions, the API's tool-use prompt), over the messages' estimate.
   * What a request made of the channel's text and other instructions (a summary, a branch, a
   * worker) is corrected by. Learnt in memory; the whole-request factor stands in until then.
   */
  messageFactor?: number;
}

export const UNCALIBRATED: Readonly<Calibration> = Object.freeze({ factor: 1, observations: 0 });

/** A factor held within `CALIBRATION.min` … `max`. */
export function clampFactor(value: number): number {
  return Math.min(CALIBRATION.max, Math.max(CALIBRATION.min, value));
}

/**
 * The factor after one response: the first observation is taken whole (a CJK channel must not
 * wait several turns to stop overflowing), later ones are smoothed. Undefined when the numbers
 * say nothing (no count from the server, a tiny request).
 */
export function observe(current: Calibration, estimatedTokens: number, realTokens: number): Calibration | undefined {
  if (!(estimatedTokens >= CALIBRATION.minEstimate) || !(realTokens > 0) || !Number.isFinite(realTokens)) return undefined;
  const ratio = clampFactor(realTokens / estimatedTokens);
  const factor = current.observations === 0 ? ratio : smoothed(current.factor, ratio);
  return { ...current, factor: round(factor), observations: current.observations + 1 };
}

/** A later observation's effect: smoothed, and at most `maxStep` either way. */
function smoothed(current: number, ratio: number): number {
  const next = current + CALIBRATION.smoothing * (ratio - current);
  return clampFactor(Math.min(current * CALIBRATION.maxStep, Math.max(current / CALIBRATION.maxStep, next)));
}

/**
 * The messages' own factor after a response: `fixed` is the request's fixed part, estimated and
 * in real tokens. Undefined when the messages are too small a share to say anything.
 */
export function observeMessages(current: Calibration, estimatedTokens: number, realTokens: number, fixed: { estimated: number; real: number }): number | undefined {
  const messages = estimatedTokens - fixed.estimated;
  const real = realTokens - fixed.real;
  if (!(messages >= CALIBRATION.minEstimate) || !(real > 0) || !Number.isFinite(real)) return undefined;
  const ratio = clampFactor(real / messages);
  return round(current.messageFactor === undefined ? ratio : smoothed(current.messageFactor, ratio));
}

/** The factor a request of the channel's messages and other instructions is corrected by. */
export function messageFactorOf(calibration: Calibration): number {
  return calibration.messageFactor ?? calibration.factor;
}

/**
 * After the server refused a request as too long, the count it gave is the truth for that
 * request: the factor rises to it at once (never below what it was), unsmoothed.
 */
export function observeOverflow(current: Calibration, estimatedTokens: number, realTokens: number | undefined): Calibration {
  if (realTokens === undefined || !(estimatedTokens > 0)) return current;
  const factor = clampFactor(Math.max(current.factor, realTokens / estimatedTokens));
  return { ...current, factor: round(factor), observations: current.observations + 1 };
}

/**
 * The window the thresholds apply to: the model's context window less the room reserved for
 * the answer (`context_window − max_response_tokens`), at least 1.
 */
export function usableWindow(settings: Pick<ChannelSettings, 'contextWindow' | 'maxResponseTokens'>): number {
  return Math.max(1, settings.contextWindow - settings.maxResponseTokens);
}

/** `factor × estimate / (context_window − max_response_tokens)`, the Compactor's usage. */
export function usageOf(estimatedTokens: number, factor: number, settings: Pick<ChannelSettings, 'contextWindow' | 'maxResponseTokens'>): number {
  return (factor * estimatedTokens) / usableWindow(settings);
}

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
