import type { HistoryEntry } from '../channel/types.js';
import { alignedCut, targetCount } from './planner.js';

export const MARKER_SUFFIX = 'recall them with memory_search.';

/** The marker text standing in for truncated messages. */
export function markerText(count: number): string {
  return `${count} older message${count === 1 ? ' was' : 's were'} truncated; ${MARKER_SUFFIX}`;
}

/**
 * How many of the oldest live entries an emergency truncation drops: `fraction` of them by
 * count, turn-aligned. May be all of them (emergency must free room whatever the shape of the
 * history); 0 only when there is nothing live.
 */
export function truncationCount(entries: readonly HistoryEntry[], fraction: number): number {
  if (entries.length === 0) return 0;
  return alignedCut(entries, targetCount(entries.length, fraction));
}
