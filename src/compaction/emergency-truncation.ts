import { filesIn } from '../attachments/summary-note.js';
import type { ChannelState } from '../context/channel-state.js';
import type { SummaryWrites } from '../context/history-store.js';
import type { HistoryEntry } from '../context/types.js';
import { usageOf } from '../context/calibration.js';
import { estimateSummaryTokens, SUMMARY_HEADER_TOKENS } from '../context/summary-text.js';
import type { Clock } from '../common/clock.js';
import type { EventStream } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import { filesOfPrefix, markerCount, markerFiles, markerText, NO_FILES, truncationCut, withFiles } from './emergency.js';
import { provisionalMarkerId, saveUnsavedMarkers } from './marker-writes.js';
import { emergencyCeiling, roundUsage } from './window-figures.js';

/** What an emergency truncation reads and writes besides the channel itself. */
export interface TruncationContext {
  store: SummaryWrites;
  events: EventStream;
  clock: Clock;
  retryFailedArchives(state: ChannelState, entries: readonly HistoryEntry[]): true | Promise<boolean>;
  estimate(state: ChannelState, settings: ChannelSettings): number;
  /** The correction for an estimate now (see `CompactionCoordinatorOptions.factorAt`). */
  factorAt?(state: ChannelState, settings: ChannelSettings, tokens: number): number;
}

/**
 * Emergency: in memory at once, then one small transaction. Drops the oldest live entries
 * behind a truncation marker until the estimate is below the emergency threshold (and at most
 * `ceilingTokens` when given), never the earliest message the bot is to answer nor anything
 * after it (`ChannelState.protectedFrom`). False when nothing could be dropped.
 */
export function truncateInPlace(
  context: TruncationContext,
  state: ChannelState,
  settings: ChannelSettings,
  sizes: { tokensBefore: number; ceilingTokens?: number },
): boolean {
  const { tokensBefore, ceilingTokens } = sizes;
  const startedAt = performance.now();
  const entries = state.entries;
  // Back-to-back truncations grow the newest marker instead of stacking markers without
  // bound (a window too small for the prompt truncates on every message). Not while a worker
  // is in flight: its summary must be able to land on a marker of exactly its own range.
  const newest = state.summaries[state.summaries.length - 1];
  const extended = newest?.kind === 'marker' && state.compaction === undefined ? newest : undefined;
  const earlier = extended ? markerCount(extended.content) : 0;
  const earlierFiles = extended ? markerFiles(extended.content) : NO_FILES;
  const filesOf = filesOfPrefix(entries);
  const textFor = (dropped: number) => markerText(earlier + dropped, withFiles(earlierFiles, filesOf(dropped)));
  const fromSeq = extended ? extended.fromSeq : entries[0]!.seq;
  // The first summary also brings the header that introduces summaries in the system prompt.
  const headerTokens = state.summaries.length === 0 ? SUMMARY_HEADER_TOKENS : 0;
  const markerTokens = (dropped: number) =>
    headerTokens -
    (extended?.tokens ?? 0) +
    estimateSummaryTokens({ kind: 'marker', fromSeq, toSeq: entries[dropped - 1]!.seq, content: textFor(dropped) });
  // Below the emergency threshold afterwards, or the very next request could overflow the window.
  // The correction at today's mix: as messages leave, the fixed part's share grows, which for a
  // channel whose messages cost more than the prompt only makes this ceiling conservative.
  const factor = context.factorAt ? context.factorAt(state, settings, tokensBefore) : state.calibration.factor;
  const ceiling = Math.min(ceilingTokens ?? Infinity, emergencyCeiling(settings, factor));
  const mustFree = Math.max(0, tokensBefore - ceiling);
  const protectFromSeq = state.protectedFrom();
  const protectFrom = protectFromSeq === undefined ? undefined : firstIndexFrom(state.entries, protectFromSeq);
  const { count, held } = truncationCut(state.entries, settings.compaction.emergencyFraction, {
    markerTokens,
    mustFree,
    ...(protectFrom === undefined ? {} : { protectFrom }),
  });
  if (count === 0) {
    // Only what is being answered is live: it stays, and the request is sized to what is left.
    context.events.emit({ type: 'compaction_skipped', channel_id: state.channelId, tier: 'emergency', reason: 'only_current_turn_live' });
    return false;
  }
  // Messages whose replies lie past a cut through overlapping turns stay live with them.
  const dropped = held.size === 0 ? state.entries.slice(0, count) : state.entries.slice(0, count).filter((entry) => !held.has(entry));
  const toSeq = state.entries[count - 1]!.seq;
  // Transcript writes that failed are sent again before these leave the context (the store
  // keeps their text searchable even while the embedder is down).
  void context.retryFailedArchives(state, dropped);
  const draft = {
    channelId: state.channelId,
    kind: 'marker' as const,
    fromSeq,
    toSeq,
    content: held.size === 0 ? textFor(count) : markerText(earlier + dropped.length, withFiles(earlierFiles, dropped.flatMap(filesIn))),
    createdAt: extended?.createdAt ?? context.clock.now(),
  };
  const marker = { ...draft, tokens: estimateSummaryTokens(draft) };
  // Memory first, then the write: the truncation holds even when the write fails (it is retried
  // at the next check, and a restart before then finds the entries live again, nothing lost).
  const id = extended ? extended.id : provisionalMarkerId();
  state.removeHeadExcept(count, held);
  if (extended) {
    state.replaceSummary({ id, ...marker });
    state.markerEntries.set(id, [...(state.markerEntries.get(id) ?? []), ...dropped]);
  } else {
    state.addSummary({ id, ...marker });
    state.markerEntries.set(id, dropped);
  }
  state.unsavedMarkers.add(id);
  state.lastCompaction = { tier: 'emergency', at: context.clock.now(), messages: dropped.length };
  const tokensAfter = context.estimate(state, settings);
  const figures = {
    messages_dropped: dropped.length,
    tokens_freed: Math.max(0, tokensBefore - tokensAfter),
    usage_before: roundUsage(usageOf(tokensBefore, state.calibration.factor, settings)),
    usage_after: roundUsage(usageOf(tokensAfter, state.calibration.factor, settings)),
    calibration_factor: state.calibration.factor,
    preempted_worker: state.compaction !== undefined,
    merged_into_marker: extended !== undefined,
    // Emergency work runs inside the turn: operators watch that it stays small (the write apart).
    duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000,
  };
  // Reported once the write is done (or failed): the event says whether the marker is saved.
  const written: Promise<void> = saveUnsavedMarkers(context, state).then((saved) => {
    if (state.truncationWritten === written) state.truncationWritten = undefined;
    context.events.emit({
      type: 'emergency_truncation',
      channel_id: state.channelId,
      marker_id: state.summaries.find((summary) => summary.toSeq === marker.toSeq && summary.kind === 'marker')?.id ?? id,
      saved,
      ...figures,
    });
  });
  state.truncationWritten = written;
  return true;
}

/** Index of the first entry with a seq at or after `seq` (entries ascend by seq). */
function firstIndexFrom(entries: readonly HistoryEntry[], seq: number): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (entries[middle]!.seq < seq) low = middle + 1;
    else high = middle;
  }
  return low;
}
