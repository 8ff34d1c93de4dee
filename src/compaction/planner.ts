import type { HistoryEntry, SummaryEntry } from '../context/types.js';

/** A contiguous oldest range of the live context chosen for one compaction. */
export interface CompactionPlan {
  /** The snapshot: the very entry objects that were live, oldest first. */
  entries: HistoryEntry[];
  /** Live summaries folded into this one (roll-up); empty otherwise. */
  priorSummaries: SummaryEntry[];
  /** First and last seq the resulting summary stands for. */
  fromSeq: number;
  toSeq: number;
  /** Tokens of the entries and summaries the plan replaces. */
  tokens: number;
  /**
   * Set when the cut passes through overlapping turns: the oldest live entries up to the cut,
   * in order, `entries` and `held` together. `held` are the messages whose replies lie past the
   * cut: they stay live with them, and the summary does not take them.
   */
  range?: HistoryEntry[];
  held?: HistoryEntry[];
}

/** A cut through overlapping turns: the first `cut` entries, of which `held` stay live. */
export interface ThroughCut {
  cut: number;
  held: Set<HistoryEntry>;
}

/**
 * A cut of the first `cut` entries that may pass through turns: every entry before it whose
 * turn goes on after it is held back (stays live, with the rest of its turn), so a message and
 * its reply still end up on one side. Undefined when every entry before the cut would be held.
 * In a busy channel a streamed reply lands after the messages that came meanwhile, and when
 * the next question's reply lands later still, turns overlap in a chain with no clean boundary
 * short of the whole history; this is the cut that still takes about the fraction asked.
 */
export function cutThrough(entries: readonly HistoryEntry[], cut: number): ThroughCut | undefined {
  if (cut <= 0) return undefined;
  const lastIndex = new Map<number, number>();
  for (let index = 0; index < entries.length; index += 1) lastIndex.set(entries[index]!.turnId, index);
  const held = new Set<HistoryEntry>();
  for (let index = 0; index < cut; index += 1) {
    const entry = entries[index]!;
    if (lastIndex.get(entry.turnId)! >= cut) held.add(entry);
  }
  return held.size < cut ? { cut, held } : undefined;
}

/**
 * How many of the oldest live entries to take so that the cut falls on a turn boundary: no turn
 * (a message, its tool calls and results, the reply) has entries on both sides. Prefers the
 * largest such cut not above `target`, else the smallest one above it, never above `maxCut`
 * (0 when there is none). O(n), run only when a compaction or truncation is planned.
 */
export function alignedCut(entries: readonly HistoryEntry[], target: number, maxCut = entries.length): number {
  const { below, above } = cleanCuts(entries, target, maxCut);
  return below > 0 ? below : above;
}

/**
 * The clean cuts (turn boundaries) on either side of `target`: the largest not above it and the
 * smallest above it, neither above `maxCut`; 0 where there is none. The whole history counts as
 * one. O(n).
 */
function cleanCuts(entries: readonly HistoryEntry[], target: number, maxCut = entries.length): { below: number; above: number } {
  let below = 0;
  if (entries.length === 0 || maxCut <= 0) return { below, above: 0 };
  const lastIndex = new Map<number, number>();
  for (let index = 0; index < entries.length; index += 1) lastIndex.set(entries[index]!.turnId, index);
  let reach = -1;
  for (let index = 0; index < entries.length; index += 1) {
    reach = Math.max(reach, lastIndex.get(entries[index]!.turnId)!);
    if (reach !== index) continue;
    const cut = index + 1;
    if (cut > maxCut) break;
    if (cut > target) return { below, above: cut };
    below = cut;
  }
  return { below, above: 0 };
}

/**
 * How far from its target a worker's clean cut may fall, as a share of the target: one within
 * it is taken as it is; past it, the cut is made at the target through the turns there.
 */
export const CLEAN_CUT_SLACK = 0.25;

/** How many of the oldest entries weigh at most `budget`, each with `perEntry` more. */
function fittingCount(entries: readonly HistoryEntry[], budget: number, perEntry: number): number {
  let total = 0;
  for (let index = 0; index < entries.length; index += 1) {
    total += entries[index]!.tokens + perEntry;
    if (total > budget) return index;
  }
  return entries.length;
}

/** Entries to take for a fraction of the live history, at least one. */
export function targetCount(liveEntries: number, fraction: number): number {
  return Math.max(1, Math.ceil(liveEntries * fraction));
}

/**
 * Plans a worker's range: the oldest `fraction` of live entries, at a turn boundary within
 * `CLEAN_CUT_SLACK` of it, else through the turns there with messages held (so at most a quarter
 * more than the fraction, unless one turn spans it). Never the whole live history, nor a message
 * a queued or running turn answers (its reply would be cut off from it). When the live summaries
 * take more than `rollupTokens`, they are folded in as well. Undefined when nothing can be
 * compacted.
 */
export function planCompaction(options: {
  entries: readonly HistoryEntry[];
  summaries: readonly SummaryEntry[];
  summaryTokens: number;
  fraction: number;
  rollupTokens: number;
  /** Entries from this seq on are not taken: the earliest a queued or running turn answers, and after. */
  protectFromSeq?: number;
  /**
   * The most the range may weigh for its summary request to fit the model's window with room
   * for the summary (estimated tokens, with `lineTokens` more per entry for its transcript line).
   */
  maxTokens?: number;
  lineTokens?: number;
}): CompactionPlan | undefined {
  const { entries } = options;
  let maxCut = entries.length;
  if (options.protectFromSeq !== undefined) {
    maxCut = 0;
    while (maxCut < entries.length && entries[maxCut]!.seq < options.protectFromSeq) maxCut += 1;
  }
  const cap = options.maxTokens ?? Infinity;
  // Earlier summaries are folded in only when the request still has room for messages besides.
  const rollUp = options.summaryTokens > options.rollupTokens && options.summaryTokens < cap / 2;
  let target = targetCount(entries.length, options.fraction);
  if (cap !== Infinity) target = Math.min(target, Math.max(1, fittingCount(entries, cap - (rollUp ? options.summaryTokens : 0), options.lineTokens ?? 0)));
  // A clean turn boundary within a quarter of the target is taken (the one below it first);
  // otherwise (overlapping turns, or one long turn across the target) the cut is made at the
  // target and the messages whose replies lie past it are held. Only when every entry before
  // the target would be held (one turn spans it) does the cut go on to the next clean boundary.
  const { below, above } = cleanCuts(entries, target, maxCut);
  // An aligned cut past a target the summary request's room lowered would not fit it either.
  const aboveFits = above > 0 && above < entries.length && above <= target * (1 + CLEAN_CUT_SLACK) && cap === Infinity;
  const belowFits = below > 0 && below < entries.length && below >= target * (1 - CLEAN_CUT_SLACK);
  let cut = belowFits ? below : aboveFits ? above : 0;
  let held: Set<HistoryEntry> | undefined;
  if (cut === 0) {
    const through = cutThrough(entries, Math.min(target, maxCut, entries.length - 1));
    if (through) ({ cut, held } = through);
    else cut = below > 0 ? below : above;
  }
  if (cut === 0 || cut >= entries.length) return undefined;
  const range = entries.slice(0, cut);
  const snapshot = held ? range.filter((entry) => !held.has(entry)) : range;
  const priorSummaries = rollUp ? [...options.summaries] : [];
  let tokens = 0;
  for (const entry of snapshot) tokens += entry.tokens;
  for (const summary of priorSummaries) tokens += summary.tokens;
  return {
    entries: snapshot,
    priorSummaries,
    fromSeq: priorSummaries.length > 0 ? Math.min(priorSummaries[0]!.fromSeq, snapshot[0]!.seq) : snapshot[0]!.seq,
    toSeq: range[range.length - 1]!.seq,
    tokens,
    ...(held && held.size > 0 ? { range, held: [...held] } : {}),
  };
}

/**
 * A roll-up of the live summaries alone, with no entries: for when the summaries themselves
 * keep the context over the emergency threshold (the window shrank on reload), which no cut of
 * live entries can fix. Undefined unless they take more than `rollupTokens`.
 */
export function planRollUp(options: { summaries: readonly SummaryEntry[]; summaryTokens: number; rollupTokens: number }): CompactionPlan | undefined {
  const { summaries } = options;
  if (summaries.length === 0 || options.summaryTokens <= options.rollupTokens) return undefined;
  return {
    entries: [],
    priorSummaries: [...summaries],
    fromSeq: summaries[0]!.fromSeq,
    toSeq: summaries[summaries.length - 1]!.toSeq,
    tokens: options.summaryTokens,
  };
}
