import type { ChannelSettings, CompactionSettings, DiscordSettings } from './types.js';
import { report, type ValidationSink } from './validate-table.js';

const THRESHOLD_ORDER = [
  ['backgroundThreshold', 'background_threshold'],
  ['aggressiveThreshold', 'aggressive_threshold'],
  ['emergencyThreshold', 'emergency_threshold'],
] as const;

/**
 * `0 < background < aggressive < emergency ≤ 1`. The bounds are already checked per key; this
 * checks the order of the merged values. For a channel override, only pairs where the channel
 * sets at least one of the two keys are reported (a broken `[defaults]` is reported once, there),
 * and a value inherited from `[defaults.compaction]` is named as such.
 */
export function checkThresholdOrder(
  merged: CompactionSettings,
  ownKeys: ReadonlySet<string>,
  filePath: readonly string[],
  sink: ValidationSink,
  options: { isOverride: boolean; refused?: ReadonlySet<string> },
): void {
  for (let index = 0; index + 1 < THRESHOLD_ORDER.length; index++) {
    const [lowKey, lowName] = THRESHOLD_ORDER[index]!;
    const [highKey, highName] = THRESHOLD_ORDER[index + 1]!;
    // A refused value is reported on its own; the default standing in for it proves nothing.
    if (options.refused?.has(lowKey) || options.refused?.has(highKey)) continue;
    const low = merged[lowKey];
    const high = merged[highKey];
    if (low < high) continue;
    const lowOwn = ownKeys.has(lowKey);
    const highOwn = ownKeys.has(highKey);
    if (options.isOverride && !lowOwn && !highOwn) continue;
    const inherited = (own: boolean) => (options.isOverride && !own ? ', from [defaults.compaction]' : '');
    // Blame the key the operator wrote in this table; when both are, the lower one.
    if (!options.isOverride || lowOwn) {
      report(sink, [...filePath, lowName], `${low} must be below ${highName} (${high}${inherited(highOwn)}); thresholds must satisfy 0 < background < aggressive < emergency <= 1`);
    } else {
      report(sink, [...filePath, highName], `${high} must be above ${lowName} (${low}${inherited(lowOwn)}); thresholds must satisfy 0 < background < aggressive < emergency <= 1`);
    }
  }
}

/** The burst window cannot close before the quiet period it caps. */
export function checkDiscordTiming(
  discord: DiscordSettings,
  sink: ValidationSink,
  refused: ReadonlySet<string> = new Set(),
): void {
  if (refused.has('debounceMs') || refused.has('debounceMaxMs')) return;
  if (discord.debounceMaxMs < discord.debounceMs) {
    report(
      sink,
      ['discord', 'debounce_max_ms'],
      `${discord.debounceMaxMs} must be at least debounce_ms (${discord.debounceMs})`,
    );
  }
}

/**
 * Tokens the emergency tier needs below its threshold besides the system prompt: the tool
 * definitions the channel agent is sent (about 300 for memory_search and memory_save), the
 * truncation marker, and one message to answer.
 */
export const EMERGENCY_FLOOR_TOKENS = 768;

/** The emergency tier's room, when it is too small (see `answerRoomShortfall`). */
export interface AnswerRoomShortfall {
  /** `context_window − max_response_tokens`: what the thresholds apply to. */
  room: number;
  /** Tokens below the emergency threshold of that room. */
  usable: number;
  /** What must fit there: the system prompt plus `EMERGENCY_FLOOR_TOKENS`. */
  needed: number;
}

/**
 * The thresholds apply to `context_window − max_response_tokens` (the answer's room is
 * reserved). Below the emergency threshold of that, the system prompt, the tools, a truncation
 * marker and the message being answered must fit, or every turn would truncate everything and
 * still overflow. Undefined when they fit. The one rule for `config check` and for a window
 * given on the command line (`magpie replay --context-window`).
 */
export function answerRoomShortfall(settings: Pick<ChannelSettings, 'contextWindow' | 'maxResponseTokens' | 'systemPrompt' | 'compaction'>): AnswerRoomShortfall | undefined {
  const room = settings.contextWindow - settings.maxResponseTokens;
  // The estimate's own rule (4 characters per token), without importing the channel code.
  const needed = Math.ceil(settings.systemPrompt.length / 4) + EMERGENCY_FLOOR_TOKENS;
  const usable = Math.floor(room * settings.compaction.emergencyThreshold);
  return usable >= needed ? undefined : { room, usable, needed };
}

/** The smallest `context_window` that passes `answerRoomShortfall` with the other settings as they are. */
export function smallestContextWindow(settings: Pick<ChannelSettings, 'maxResponseTokens' | 'systemPrompt' | 'compaction'>): number {
  const needed = Math.ceil(settings.systemPrompt.length / 4) + EMERGENCY_FLOOR_TOKENS;
  let window = settings.maxResponseTokens + Math.ceil(needed / settings.compaction.emergencyThreshold);
  // Floating point may leave the floor one token short; the next whole window is enough.
  while (answerRoomShortfall({ ...settings, contextWindow: window }) !== undefined) window += 1;
  return window;
}

/** Why the room is too small, in the words `config check` and `replay --context-window` share. */
export function answerRoomExplanation(settings: Pick<ChannelSettings, 'compaction'>, shortfall: AnswerRoomShortfall): string {
  return (
    `the thresholds apply to context_window - max_response_tokens = ${shortfall.room}, and below emergency_threshold (${settings.compaction.emergencyThreshold}) ` +
    `that is ${Math.max(0, shortfall.usable)} tokens, less than the ${shortfall.needed} the emergency tier needs (system prompt ` +
    `${shortfall.needed - EMERGENCY_FLOOR_TOKENS}, tools, marker and one message ${EMERGENCY_FLOOR_TOKENS})`
  );
}

/**
 * `answerRoomShortfall` for a table of the file. Reported on `max_response_tokens`, naming
 * `context_window` too; for a channel override only when it sets one of the keys involved.
 */
export function checkAnswerRoom(
  merged: ChannelSettings,
  ownKeys: ReadonlySet<string>,
  filePath: readonly string[],
  sink: ValidationSink,
  options: { isOverride: boolean; refused?: ReadonlySet<string> },
): void {
  const involved = ['contextWindow', 'maxResponseTokens', 'systemPrompt', 'emergencyThreshold'];
  if (involved.some((key) => options.refused?.has(key))) return;
  if (options.isOverride && !involved.some((key) => ownKeys.has(key))) return;
  const shortfall = answerRoomShortfall(merged);
  if (shortfall === undefined) return;
  report(
    sink,
    [...filePath, 'max_response_tokens'],
    `${merged.maxResponseTokens} leaves too little of context_window (${merged.contextWindow}): ${answerRoomExplanation(merged, shortfall)}; ` +
      'raise context_window or lower max_response_tokens',
  );
}

/**
 * A summary request's own part in tokens: the summarizer's instructions, its memory_save tool and
 * the API's tool-use prompt (the compaction code counts the same; a test keeps them in step).
 */
export const SUMMARY_REQUEST_TOKENS = 1400;

/**
 * A summary request carries the range it summarizes, up to `aggressive_fraction` of the history
 * at `aggressive_threshold`, and must leave its summary room in the window: `summary_max_tokens`
 * that cannot fit beside that is named (it would be lowered on every compaction), and so is a
 * `summary_min_tokens` that cannot fit at all. Only where the table sets one of them: the
 * defaults shrink with a small window by themselves.
 */
export function checkSummaryRoom(
  merged: ChannelSettings,
  ownKeys: ReadonlySet<string>,
  filePath: readonly string[],
  sink: ValidationSink,
  options: { refused?: ReadonlySet<string> },
): void {
  // What the room is worked out from must be what the file says, not a default standing in for a refused value.
  if (['contextWindow', 'maxResponseTokens', 'aggressiveThreshold', 'aggressiveFraction'].some((key) => options.refused?.has(key))) return;
  const compaction = merged.compaction;
  const usable = Math.max(0, merged.contextWindow - merged.maxResponseTokens);
  const range = Math.ceil(usable * compaction.aggressiveThreshold * compaction.aggressiveFraction);
  const input = range + SUMMARY_REQUEST_TOKENS;
  const left = merged.contextWindow - input;
  for (const [key, name] of [['summaryMaxTokens', 'summary_max_tokens'], ['summaryMinTokens', 'summary_min_tokens']] as const) {
    if (!ownKeys.has(key) || options.refused?.has(key)) continue;
    const value = compaction[key];
    if (value <= left) continue;
    report(
      sink,
      [...filePath, 'compaction', name],
      `${value} cannot fit context_window (${merged.contextWindow}) at the compaction tiers: a summary request carries up to ` +
        `${range} tokens of history (aggressive_fraction ${compaction.aggressiveFraction} of the history at aggressive_threshold ` +
        `${compaction.aggressiveThreshold}) and about ${SUMMARY_REQUEST_TOKENS} of instructions, leaving ${Math.max(0, left)} for the summary; ` +
        `lower ${name} to at most ${Math.max(0, left)} or raise context_window`,
    );
  }
}
