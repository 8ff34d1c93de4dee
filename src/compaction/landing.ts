import type { ChannelState } from '../context/channel-state.js';
import type { SummaryWrites } from '../context/history-store.js';
import { estimateSummaryTokens } from '../context/summary-text.js';
import type { Clock } from '../common/clock.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import type { CompactionOutcome } from './compaction-outcome.js';
import { filesNote, markerFiles, NO_FILES, withFiles } from './emergency.js';
import type { CompactionTier } from './events.js';
import type { CompactionPlan } from './planner.js';
import { saveUnsavedMarkersHeld } from './marker-writes.js';
import { applySplice, matchSnapshot } from './splice.js';
import type { WorkerOutcome } from './worker.js';

/** Whether the plan read a live message that compaction must now leave alone (`ChannelState.protectedFrom`). */
function readsAwaited(state: ChannelState, plan: CompactionPlan): boolean {
  const from = state.protectedFrom();
  return from !== undefined && plan.entries.some((entry) => entry.seq >= from);
}

/** Appended to a meta-summary that folded a truncation marker, so the hint is not lost. */
const FOLDED_MARKER_NOTE = '(Some older messages were truncated without a summary; recall them with memory_search.)';

/** A worker's run, as it comes back to be landed. */
export interface FinishedJob {
  compactionId: string;
  tier: Exclude<CompactionTier, 'emergency'>;
  plan: CompactionPlan;
  outcome: WorkerOutcome;
  summarizer: string;
  /** performance.now() when the worker started. */
  startedAt: number;
}

/** What landing a worker's result reads and writes besides the channel itself. */
export interface LandingContext {
  store: SummaryWrites;
  events: EventStream;
  clock: Clock;
  settingsFor(channelId: string): ChannelSettings;
  estimate(state: ChannelState, settings: ChannelSettings): number;
}

/**
 * Splices a finished worker's summary into the channel (compare-and-swap against the plan's
 * snapshot), or counts the failure. Never throws for a storage error: it is a failed outcome.
 * Runs inside the channel's exclusive section (the match, the writes and the mirror together).
 */
export async function landWorkerOutcome(context: LandingContext, state: ChannelState, job: FinishedJob): Promise<CompactionOutcome> {
  const { compactionId, tier, plan, outcome } = job;
  // A measurement, not a time of day: it stays on the monotonic clock even when replay drives `clock`.
  const duration = Math.round(performance.now() - job.startedAt);
  const base = { channel_id: state.channelId, compaction_id: compactionId, tier };
  const settings = context.settingsFor(state.channelId);
  const fail = (reason: string): CompactionOutcome => {
    state.consecutiveFailures += 1;
    context.events.emit({
      type: 'compaction_failed',
      ...base,
      reason,
      consecutive_failures: state.consecutiveFailures,
      summarizer: job.summarizer,
      duration_ms: duration,
    });
    return { status: 'failed', compactionId, reason };
  };
  if (!outcome.ok) return fail(outcome.reason);

  const replan = (reason: string): CompactionOutcome => {
    context.events.emit({ type: 'compaction_replanned', ...base, reason });
    return { status: 'replanned', compactionId, reason };
  };
  const match = matchSnapshot(state, plan);
  if (match.place === 'gone') return replan(match.reason);
  // A message the worker read may since have been asked to be answered (its hold comes just
  // after it arrives): summarized now, it would leave from under the turn that answers it.
  if (readsAwaited(state, plan)) return replan('answer_awaited');
  const content = landedContent(plan, outcome.summary);
  // What the range cost minus what its summary costs: a summary that frees too little would
  // trigger again at once (or even grow the context). The next attempt uses the extractive
  // summarizer, which is sized to free enough.
  const gain = plan.tokens - landedSummaryTokens(plan, content);
  if (gain < settings.compaction.minTokensFreed) {
    state.consecutiveFailures = Math.max(state.consecutiveFailures, settings.compaction.fallbackAfterFailures - 1);
    return fail('no_gain');
  }
  const tokensBefore = context.estimate(state, settings);
  // A truncation whose write failed must reach the database before a splice moves the live
  // start past it, or a restart would find its entries neither live nor covered.
  if (!(await saveUnsavedMarkersHeld(context, state))) return fail('storage_error: an earlier truncation is not saved yet');
  let summary;
  try {
    summary = await applySplice({ state, store: context.store, plan, match, content, summarizer: job.summarizer, now: context.clock.now() });
  } catch (error) {
    return fail(`storage_error: ${errorMessage(error)}`);
  }
  state.consecutiveFailures = 0;
  const tokensAfter = context.estimate(state, settings);
  // In place of the oldest live messages the summary frees what they cost less what it costs,
  // whatever arrived meanwhile (both figures are taken now; a first summary also brings the
  // summaries' header, which can leave nothing freed, never less). In place of a truncation
  // marker the room was freed by the truncation already: the summary brings back some of it
  // (`tokens_added`), unless its roll-up folded earlier summaries into less than they cost.
  const tokensFreed = Math.max(0, tokensBefore - tokensAfter);
  state.lastCompaction = {
    tier,
    at: context.clock.now(),
    messages: plan.entries.length,
  };
  context.events.emit({
    type: 'compaction_completed',
    ...base,
    messages_compacted: plan.entries.length,
    summaries_folded: plan.priorSummaries.length,
    replaced_marker: match.place === 'marker',
    tokens_before: tokensBefore,
    tokens_after: tokensAfter,
    tokens_freed: tokensFreed,
    ...(match.place === 'marker' ? { tokens_added: Math.max(0, tokensAfter - tokensBefore) } : {}),
    range_tokens: plan.tokens,
    summary_tokens: summary.tokens,
    memories_saved: outcome.memoriesSaved,
    duration_ms: duration,
    summarizer: job.summarizer,
  });
  return {
    status: 'completed',
    compactionId,
    messagesCompacted: plan.entries.length,
    tokensFreed,
  };
}

/** The summary text as it lands: a note for the truncation markers it folds, with their files. */
export function landedContent(plan: CompactionPlan, summary: string): string {
  const folded = plan.priorSummaries.filter((prior) => prior.kind === 'marker');
  if (folded.length === 0) return summary;
  // The files the folded markers named stay named.
  const files = folded.map((marker) => markerFiles(marker.content)).reduce((all, next) => withFiles(all, next.named, next.more), NO_FILES);
  return `${summary}\n${FOLDED_MARKER_NOTE}${files.named.length > 0 ? ` ${filesNote(files)}` : ''}`;
}

/**
 * What a summary of `plan` with this content costs in the context. The header that introduces
 * summaries is left out: a channel pays it once, with its first summary, whatever that holds.
 */
export function landedSummaryTokens(plan: CompactionPlan, content: string): number {
  return estimateSummaryTokens({ kind: 'summary', fromSeq: plan.fromSeq, toSeq: plan.toSeq, content });
}

/**
 * The most a summary's own text may cost (in estimated tokens) for its landing to free at least
 * `minTokensFreed`; the extractive summarizer stays within it by construction.
 */
export function summaryRoom(plan: CompactionPlan, minTokensFreed: number): number {
  // Text joined to the frame costs at most its own estimate plus one (each part rounds up).
  return plan.tokens - minTokensFreed - landedSummaryTokens(plan, landedContent(plan, '')) - 1;
}
