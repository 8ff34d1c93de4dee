import type { HistoryEntry } from '../channel/types.js';
import { alignedCut, targetCount } from './planner.js';

export const MARKER_SUFFIX = 'recall them with memory_search.';

/** The marker text standing in for truncated messages. */
export function markerText(count: number): string {
  return `${count} older message${count === 1 ? ' was' : 's were'} truncated; ${MARKER_SUFFIX}`;
}

/** How many messages a marker stands for, read back from its text (it survives restarts). */
export function markerCount(content: string): number {
  const match = /^(\d+) older message/.exec(content);
  return match ? Number(match[1]) : 0;
}

/**
 * How many of the oldest live entries an emergency truncation drops: `fraction` of them by
 * count, turn-aligned. May be all of them (emergency must free room whatever the shape of the
 * history); 0 only when there is nothing live.
 *
 * With `markerTokens` (what the marker for a cut of n entries costs), the cut is extended turn
 * by turn until what it drops outweighs the marker: otherwise a cut of a few short messages
 * ahead of a long one would leave the context larger than before, and the next message would
 * truncate again.
 */
export function truncationCount(
  entries: readonly HistoryEntry[],
  fraction: number,
  markerTokens?: (count: number) => number,
): number {
  if (entries.length === 0) return 0;
  const count = alignedCut(entries, targetCount(entries.length, fraction));
  if (markerTokens === undefined) return count;
  let dropped = 0;
  for (let index = 0; index < count; index += 1) dropped += entries[index]!.tokens;
  if (dropped > markerTokens(count)) return count;
  const lastIndex = new Map<number, number>();
  for (let index = 0; index < entries.length; index += 1) lastIndex.set(entries[index]!.turnId, index);
  // `count` is a turn boundary, so every turn before it ends before it.
  let reach = count - 1;
  for (let index = count; index < entries.length; index += 1) {
    dropped += entries[index]!.tokens;
    reach = Math.max(reach, lastIndex.get(entries[index]!.turnId)!);
    if (reach === index && dropped > markerTokens(index + 1)) return index + 1;
  }
  return entries.length;
}
