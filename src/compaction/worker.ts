import { errorMessage, MagpieError } from '../common/errors.js';
import type { CompactionSettings } from '../config/types.js';
import type { MemoryLocation } from '../memory/types.js';
import type { CompactionPlan } from './planner.js';
import type { Summarizer } from './summarizer.js';

export type WorkerOutcome =
  | { ok: true; summary: string; memoriesSaved: number }
  | { ok: false; reason: string };

/**
 * One compaction worker: waits until the snapshot is in the memory archive, then asks the
 * summarizer, bounded by the configured timeout. Never throws: every way of failing becomes a
 * reason, and the history is not touched here at all.
 */
export async function runWorker(options: {
  summarizer: Summarizer;
  plan: CompactionPlan;
  /** The most the summary's text may cost for its landing to free enough (see `summaryRoom`). */
  maxSummaryTokens: number;
  settings: CompactionSettings;
  /** The model's window and the channel's calibration (see `SummarizeRequest.window`). */
  window?: { contextWindow: number; factor: number };
  location: MemoryLocation;
  pendingArchives: Promise<void>[];
  /** After those: true once every entry of the plan is in the memory archive, false if one cannot be. */
  retryFailedArchives: () => true | Promise<boolean>;
  abort: AbortController;
}): Promise<WorkerOutcome> {
  const { abort } = options;
  const timer = setTimeout(() => abort.abort(new Error('timeout')), options.settings.workerTimeoutMs);
  // Summarizers that ignore the signal still lose the race against it.
  const aborted = new Promise<never>((_, reject) => {
    if (abort.signal.aborted) reject(abort.signal.reason);
    abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true });
  });
  aborted.catch(() => undefined);
  try {
    // Nothing leaves the live context before it is searchable.
    await Promise.race([Promise.all(options.pendingArchives), aborted]);
    const archived = options.retryFailedArchives();
    if (archived !== true && !(await Promise.race([archived, aborted]))) return { ok: false, reason: 'archive_failed' };
    const result = await Promise.race([
      options.summarizer.summarize({
        channelId: options.location.channelId,
        location: options.location,
        priorSummaries: options.plan.priorSummaries,
        entries: options.plan.entries,
        maxSummaryTokens: options.maxSummaryTokens,
        settings: options.settings,
        ...(options.window ? { window: options.window } : {}),
        signal: abort.signal,
      }),
      aborted,
    ]);
    const summary = typeof result?.summary === 'string' ? result.summary.trim() : '';
    if (summary === '') return { ok: false, reason: 'empty_summary' };
    return { ok: true, summary, memoriesSaved: Number(result.memoriesSaved) || 0 };
  } catch (error) {
    if (abort.signal.aborted) return { ok: false, reason: errorMessage(abort.signal.reason) === 'timeout' ? 'timeout' : 'aborted' };
    // Model errors carry a stable reason word (rate_limited, server_error, empty_summary...).
    if (error instanceof MagpieError && typeof error.context.reason === 'string') return { ok: false, reason: error.context.reason };
    return { ok: false, reason: `summarizer_error: ${errorMessage(error)}` };
  } finally {
    clearTimeout(timer);
  }
}
