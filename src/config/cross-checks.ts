import type { CompactionSettings, DiscordSettings } from './types.js';
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
