import type { ChannelState } from '../context/channel-state.js';
import type { SpliceChange, SummaryWrites } from '../context/history-store.js';
import { estimateSummaryTokens } from '../context/summary-text.js';
import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { filesIn } from '../attachments/summary-note.js';
import { markerText, NO_FILES, withFiles } from './emergency.js';
import type { CompactionPlan } from './planner.js';

/** Where a finished worker's snapshot is found now. */
export type SnapshotMatch =
  | { place: 'head' }
  /**
   * An emergency truncation dropped it meanwhile: this marker stands for it, and for `rest`
   * besides (what the summary will not cover, in the marker's order).
   */
  | { place: 'marker'; marker: SummaryEntry; rest: HistoryEntry[] }
  | { place: 'gone'; reason: string };

/**
 * Compare-and-swap check: the snapshot must still be exactly what it was (the same entry
 * objects, so an edit or a deletion shows), either as the oldest live entries (with the messages
 * it held back) or as the start of what a truncation marker dropped (see `restOfMarker`), and
 * every summary it folds must still be live.
 */
export function matchSnapshot(state: ChannelState, plan: CompactionPlan): SnapshotMatch {
  for (const prior of plan.priorSummaries) {
    if (!state.summaries.includes(prior)) return { place: 'gone', reason: 'summaries_changed' };
  }
  if (sameStart(state.entries, plan.range ?? plan.entries)) return { place: 'head' };
  const held = new Set(plan.held ?? []);
  for (const marker of state.summaries) {
    if (marker.kind !== 'marker') continue;
    const dropped = state.markerEntries.get(marker.id);
    const rest = dropped && restOfMarker(dropped, plan, held);
    if (rest) return { place: 'marker', marker, rest };
  }
  return { place: 'gone', reason: 'range_changed' };
}

/**
 * What a marker still stands for once a summary of the plan's snapshot takes its place, or
 * undefined when the snapshot is not the start of what it dropped. Messages the plan held back
 * (their replies lay past its cut) were not read: where the truncation dropped them too, with
 * their replies, they may sit among the snapshot's entries and stay behind the marker. Anything
 * else in between, or a snapshot that only partly left with this marker (the rest is live or
 * behind another marker), means it re-plans: nothing is summarized that it did not read.
 */
function restOfMarker(dropped: readonly HistoryEntry[], plan: CompactionPlan, held: ReadonlySet<HistoryEntry>): HistoryEntry[] | undefined {
  const read = plan.entries;
  const rest: HistoryEntry[] = [];
  let found = 0;
  for (const entry of dropped) {
    if (found < read.length && entry === read[found]) found += 1;
    else if (found < read.length && !held.has(entry)) return undefined;
    else rest.push(entry);
  }
  if (found < read.length) return undefined;
  // The marker's range starts after the summary's; it needs an entry there to start at (a held
  // message's reply deleted meanwhile can leave none): otherwise the marker stays as it is.
  if (rest.length > 0 && !rest.some((entry) => entry.seq > plan.toSeq)) return undefined;
  return rest;
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
    // What its summarizer read starts at its first entry; a roll-up of summaries alone read none.
    summary: { ...summaryDraft, summarizer: options.summarizer, readFromSeq: plan.entries[0]?.seq ?? plan.toSeq + 1 },
  };
  let shrunk: { marker: SummaryEntry; entries: HistoryEntry[] } | undefined;
  if (match.place === 'head') {
    // A roll-up of summaries alone leaves the live start where it is (a marker may have moved it on).
    if (plan.entries.length > 0) change.entryRange = { toSeq: plan.toSeq };
  } else if (match.rest.length === 0) {
    change.retiredSummaryIds.push(match.marker.id);
  } else {
    const { rest } = match;
    const content = markerText(rest.length, withFiles(NO_FILES, rest.flatMap(filesIn)));
    // Held messages it keeps lie inside the summary's range, as held messages live do.
    const fromSeq = rest.find((entry) => entry.seq > plan.toSeq)!.seq;
    const marker = { ...match.marker, fromSeq, content, tokens: estimateSummaryTokens({ ...match.marker, fromSeq, content }) };
    shrunk = { marker, entries: rest };
    change.shrunkMarker = { id: marker.id, fromSeq, content, tokens: marker.tokens };
  }

  const id = await options.store.splice(change);

  const summary: SummaryEntry = { id, ...summaryDraft };
  if (match.place === 'head') state.removeHeadExcept((plan.range ?? plan.entries).length, new Set(plan.held ?? []));
  for (const retired of change.retiredSummaryIds) state.removeSummary(retired);
  if (shrunk) {
    state.replaceSummary(shrunk.marker);
    state.markerEntries.set(shrunk.marker.id, shrunk.entries);
  }
  state.addSummary(summary);
  return summary;
}
