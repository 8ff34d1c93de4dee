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
  /**
   * The share of a request's messages that tool calls and results must reach for its count to
   * teach their correction (below it, what the server counted is mostly the channel's text).
   */
  toolShare: 0.25,
});

/** A channel's correction factor; `observations` 0 means no model has answered yet (factor 1). */
export interface Calibration {
  factor: number;
  observations: number;
  /**
   * The factor of the channel's messages alone: the request's real count less its fixed part
   * (system prompt, tool definitions, the API's tool-use prompt), over the messages' estimate.
   * What a request made of the channel's text and other instructions (a summary, a branch, a
   * worker) is corrected by. The whole-request factor stands in until it is learnt.
   */
  messageFactor?: number;
  /**
   * Tool calls and results (their JSON: search results, code, logs) tokenize otherwise than
   * prose: this is their correction, a multiple of the messages' factor, learnt from requests in
   * which they are a large share. Until then 1: they are corrected as the messages are.
   */
  toolFactor?: number;
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
 * in real tokens; `toolTokens` is the estimate of the tool calls and results among the messages,
 * which count at the tools' correction. Undefined when the messages are too small a share to say
 * anything.
 */
export function observeMessages(
  current: Calibration,
  estimatedTokens: number,
  realTokens: number,
  fixed: { estimated: number; real: number },
  toolTokens = 0,
): number | undefined {
  const messages = estimatedTokens - fixed.estimated;
  const real = realTokens - fixed.real;
  if (!(messages >= CALIBRATION.minEstimate) || !(real > 0) || !Number.isFinite(real)) return undefined;
  const tools = Math.min(Math.max(0, toolTokens), messages);
  const weighted = messages - tools + (current.toolFactor ?? 1) * tools;
  const ratio = clampFactor(real / weighted);
  return round(current.messageFactor === undefined ? ratio : smoothed(current.messageFactor, ratio));
}

/** The factor a request of the channel's messages and other instructions is corrected by. */
export function messageFactorOf(calibration: Calibration): number {
  return calibration.messageFactor ?? calibration.factor;
}

/** What the estimate of tool calls and results is multiplied by: the messages' factor, corrected for tools. */
export function toolFactorOf(calibration: Calibration): number {
  return messageFactorOf(calibration) * (calibration.toolFactor ?? 1);
}

/** The real-token factors a caller without a running estimate (a branch, a worker) corrects its request by. */
export interface RequestFactors {
  /** For the channel's text (see `messageFactorOf`). */
  messages: number;
  /** For tool calls and results (see `toolFactorOf`). */
  tools: number;
}

export const UNCORRECTED: Readonly<RequestFactors> = Object.freeze({ messages: 1, tools: 1 });

/** The factors of a channel's calibration, as branches and workers use them. */
export function requestFactorsOf(calibration: Calibration): RequestFactors {
  return { messages: messageFactorOf(calibration), tools: toolFactorOf(calibration) };
}

/**
 * The tools' correction after a response, from the real tokens left for them once the fixed part
 * and the text (at the messages' factor) are taken out: `residual` over the tools' estimate at
 * the messages' factor. Taken whole the first time, later smoothed and bounded like the other
 * factors. Undefined when the tools are too small a part of the request to say anything.
 */
export function observeTools(current: Calibration, tools: { estimated: number; messagesEstimated: number; residual: number }): number | undefined {
  const messageFactor = current.messageFactor;
  if (messageFactor === undefined) return undefined;
  if (!(tools.estimated >= CALIBRATION.minEstimate) || tools.estimated < CALIBRATION.toolShare * tools.messagesEstimated) return undefined;
  if (!(tools.residual > 0) || !Number.isFinite(tools.residual)) return undefined;
  const ratio = clampFactor(tools.residual / (messageFactor * tools.estimated));
  return round(current.toolFactor === undefined ? ratio : smoothed(current.toolFactor, ratio));
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
