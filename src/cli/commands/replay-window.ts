import { answerRoomExplanation, answerRoomShortfall, smallestContextWindow } from '../../config/cross-checks.js';
import type { MagpieConfig } from '../../config/types.js';
import { UsageError } from '../parse-flags.js';

/**
 * `replay --context-window N` replaces every channel's window, so it must pass the rule
 * `config check` holds `context_window` to: below the emergency threshold of the window less
 * `max_response_tokens`, the system prompt and one message must fit. A smaller window is not a
 * tougher test of compaction but a broken one (every message truncated at once), so it is
 * refused as bad usage, with the smallest window that works for every channel of the config.
 */
export function checkContextWindowFlag(config: MagpieConfig, contextWindow: number, usage: string): void {
  const tables = [
    { where: '', settings: config.defaults },
    ...Object.entries(config.channels).map(([id, settings]) => ({ where: ` (channel ${id} of the config)`, settings })),
  ];
  const failing = tables.flatMap(({ where, settings }) => {
    const shortfall = answerRoomShortfall({ ...settings, contextWindow });
    return shortfall === undefined ? [] : [{ where, settings, shortfall, smallest: smallestContextWindow(settings) }];
  });
  if (failing.length === 0) return;
  // The table that needs the most names the window that works for all.
  const worst = failing.reduce((left, right) => (right.smallest > left.smallest ? right : left));
  throw new UsageError(
    `--context-window ${contextWindow} is too small for max_response_tokens ${worst.settings.maxResponseTokens}${worst.where}: ` +
      `${answerRoomExplanation(worst.settings, worst.shortfall)}; give --context-window ${worst.smallest} or more, or lower max_response_tokens in the config`,
    usage,
  );
}
