import type { ChannelState } from '../context/channel-state.js';
import type { SpliceChange, SummaryWrites } from '../context/history-store.js';
import { estimateSummaryTokens } from '../context/summary-text.js';
import type { SummaryEntry } from '../context/types.js';
import { filesIn } from '../attachments/summary-note.js';
import { markerText, NO_FILES, withFiles } from './emergency.js';
import type { CompactionPlan } from './planner.js';

/** Where a finished worker's snapshot is found now. */
export type SnapshotMatch =
  | { place: 'head' }
  /** An emergency truncation dropped it meanwhile: it is the start of this marker's range. */
  | { place: 'marker'; marker: SummaryEntry; remaining: number }
  | { place: 'gone'; reason: string };

/**
 * Compare-and-swap check: the snapshot must still be exactly what it was (the same entry
 * objects, so an edit or a deletion shows), either as the oldest live entries or as the start of
 * a truncation marker, and every summary it folds must still be live.
 */
export function matchSnapshot(state: ChannelState, plan: CompactionPlan): SnapshotMatch {
  for (const prior of plan.priorSummaries) {
    if (!state.summaries.includes(prior)) return { place: 'gone', reason: 'summaries_changed' };
  }
  const count = plan.entries.length;
  if (sameStart(state.entries, plan.range ?? plan.entries)) return { place: 'head' };
  // A plan that held messages back lands only where it was planned: at the head.
  if (plan.range) return { place: 'gone', reason: 'range_changed' };
  for (const marker of state.summaries) {
    if (marker.kind !== 'marker') continue;
    const dropped = state.markerEntries.get(marker.id);
    if (dropped && sameStart(dropped, plan.entries)) {
      return { place: 'marker', marker, remaining: dropped.length - count };
    }
  }
  return { place: 'gone', reason: 'range_changed' };
}

function sameStart(list: readonly unknown[], start: readonly unknown[]): boolean {
  if (list.length < start.length) return false;
  for (let index = 0; index < start.length; index += 1) {
    if (list[index] !== start[index]) return false;
  }
  return true;
}

/**
 * Replaces the snapshot with one summary: in the database first, in one transaction, then in
 * memory (so a failed write leaves both unchanged). The caller holds the channel's exclusive
 * section, so the state matched is still the state changed once the write is done. Entries that arrived meanwhile are untouched
 * and stay after the summary. Returns the new summary.
 */
export async function applySplice(options: {
  state: ChannelState;
  store: SummaryWrites;
  plan: CompactionPlan;
  match: Exclude<SnapshotMatch, { place: 'gone' }>;
  content: string;
  summarizer: string;
  now: number;
}): Promise<SummaryEntry> {
  const { state, plan, match } = options;
  const draft = {
    channelId: state.channelId,
    kind: 'summary' as const,
    fromSeq: plan.fromSeq,
    toSeq: plan.toSeq,
    content: options.content,
    createdAt: options.now,
  };
  const summaryDraft = { ...draft, tokens: estimateSummaryTokens(draft) };
  const change: SpliceChange = {
    channelId: state.channelId,
    retiredSummaryIds: plan.priorSummaries.map((summary) => summary.id),
    summary: { ...summaryDraft, summarizer: options.summarizer },
  };
  let shrunk: SummaryEntry | undefined;
  if (match.place === 'head') {
    // A roll-up of summaries alone leaves the live start where it is (a marker may have moved it on).
    if (plan.entries.length > 0) change.entryRange = { toSeq: plan.toSeq };
  } else if (match.remaining === 0) {
    change.retiredSummaryIds.push(match.marker.id);
  } else {
    const rest = state.markerEntries.get(match.marker.id)!.slice(plan.entries.length);
    const content = markerText(rest.length, withFiles(NO_FILES, rest.flatMap(filesIn)));
    const fromSeq = rest[0]!.seq;
    shrunk = { ...match.marker, fromSeq, content, tokens: estimateSummaryTokens({ ...match.marker, fromSeq, content }) };
    change.shrunkMarker = { id: shrunk.id, fromSeq, content, tokens: shrunk.tokens };
  }

  const id = await options.store.splice(change);

  const summary: SummaryEntry = { id, ...summaryDraft };
  if (match.place === 'head') state.removeHeadExcept((plan.range ?? plan.entries).length, new Set(plan.held ?? []));
  for (const retired of change.retiredSummaryIds) state.removeSummary(retired);
  if (shrunk) {
    state.replaceSummary(shrunk);
    state.markerEntries.set(shrunk.id, state.markerEntries.get(shrunk.id)!.slice(plan.entries.length));
  }
  state.addSummary(summary);
  return summary;
}
