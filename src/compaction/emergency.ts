import { filesIn, SHARED_PREFIX } from '../attachments/summary-note.js';
import type { HistoryEntry } from '../context/types.js';
import { alignedCut, CLEAN_CUT_SLACK, targetCount } from './planner.js';

export const MARKER_SUFFIX = 'recall them with memory_search.';

/** A marker names this many files at most (it is sent with every request); the rest are counted. */
const MAX_NAMED_FILES = 20;

/** The images and files of the messages a marker stands for, oldest first. */
export interface MarkerFiles {
  named: readonly string[];
  /** Files beyond `MAX_NAMED_FILES`, counted only. */
  more: number;
}

export const NO_FILES: MarkerFiles = { named: [], more: 0 };

/**
 * The marker text standing in for truncated messages. It names the files they carried, so the
 * model knows they existed and can look for them, as a summary would (`withAttachmentNote`).
 */
export function markerText(count: number, files: MarkerFiles = NO_FILES): string {
  const text = `${count} older message${count === 1 ? ' was' : 's were'} truncated; ${MARKER_SUFFIX}`;
  return files.named.length === 0 ? text : `${text} ${filesNote(files)}`;
}

/** `Shared in these messages: image a.png (shared by Ana); … (and 3 more files).` */
export function filesNote(files: MarkerFiles): string {
  if (files.named.length === 0) return '';
  const more = files.more > 0 ? ` (and ${files.more} more file${files.more === 1 ? '' : 's'})` : '';
  return `${SHARED_PREFIX}${files.named.join('; ')}${more}.`;
}

/** The files a marker names, read back from its text: a marker extended after a restart keeps them. */
export function markerFiles(content: string): MarkerFiles {
  const at = content.indexOf(SHARED_PREFIX, content.indexOf(MARKER_SUFFIX));
  if (at < 0) return NO_FILES;
  let list = content.slice(at + SHARED_PREFIX.length).replace(/\.$/, '');
  const tail = / \(and (\d+) more files?\)$/.exec(list);
  if (tail) list = list.slice(0, tail.index);
  return { named: list.split('; '), more: tail ? Number(tail[1]) : 0 };
}

/** `files` with `added` (and `addedMore` counted only) after them, at most `MAX_NAMED_FILES` named. */
export function withFiles(files: MarkerFiles, added: readonly string[], addedMore = 0): MarkerFiles {
  if (added.length === 0 && addedMore === 0) return files;
  const room = Math.max(0, MAX_NAMED_FILES - files.named.length);
  return { named: [...files.named, ...added.slice(0, room)], more: files.more + Math.max(0, added.length - room) + addedMore };
}

/** The files of the first `count` entries, read from each entry once however often it is asked. */
export function filesOfPrefix(entries: readonly HistoryEntry[]): (count: number) => readonly string[] {
  const files: string[] = [];
  /** `ends[n]`: how many of `files` the first n entries carry. */
  const ends = [0];
  return (count) => {
    while (ends.length <= count) {
      files.push(...filesIn(entries[ends.length - 1]!));
      ends.push(files.length);
    }
    return files.slice(0, ends[count]);
  };
}

/** How many messages a marker stands for, read back from its text (it survives restarts). */
export function markerCount(content: string): number {
  const match = /^(\d+) older message/.exec(content);
  return match ? Number(match[1]) : 0;
}

/** What shapes an emergency cut besides the fraction. */
export interface TruncationOptions {
  /** What the marker for a cut of n entries costs, in tokens (header and merged marker included). */
  markerTokens?: (count: number) => number;
  /** Tokens the cut must free beyond its marker's cost (to get under the emergency threshold). */
  mustFree?: number;
  /** Index of the earliest message a queued or running turn answers: it and all after it stay live. */
  protectFrom?: number;
}

/**
 * How many of the oldest live entries an emergency truncation drops: `fraction` of them by
 * count, turn-aligned. May be all of them (emergency must free room whatever the shape of the
 * history); 0 only when there is nothing live.
 *
 * With `markerTokens`, the cut is extended turn by turn until what it drops outweighs the
 * marker by more than `mustFree` tokens: otherwise a cut of a few short messages ahead of a long
 * one would leave the context larger than before, and a half that is not enough (the window
 * shrank on reload, one huge paste) would leave the next request over the window; either way
 * the next message would truncate again.
 *
 * With `protectFrom`, the messages queued and running turns answer (and whatever came after the
 * earliest of them) always stay live: without them the answers would be to nothing. The cut
 * frees what it can before it (0 when nothing there frees room); short of `mustFree`, the
 * request is sized to what is left and the check after the turn truncates again, once the turn
 * is whole.
 */
export function truncationCount(entries: readonly HistoryEntry[], fraction: number, options: TruncationOptions = {}): number {
  return truncationCut(entries, fraction, options).count;
}

/**
 * `truncationCount`, and when turns overlap so that no turn boundary before the message being
 * answered frees room (or the only boundary is the whole history), a cut through them instead:
 * the first `count` entries leave except `held`, the messages whose replies lie past the cut
 * (see `cutThrough`). Its size follows the same rule: the smallest past the fraction that frees
 * `mustFree` beyond its marker, else the largest that frees anything.
 */
export function truncationCut(entries: readonly HistoryEntry[], fraction: number, options: TruncationOptions = {}): { count: number; held: ReadonlySet<HistoryEntry> } {
  if (entries.length === 0) return NOTHING;
  const protectFrom = options.protectFrom ?? entries.length;
  const limit = protectFrom < entries.length ? protectFrom : entries.length;
  if (limit === 0) return NOTHING;
  const aligned = cutWithin(entries, fraction, options, limit);
  const target = targetCount(entries.length, fraction);
  // A turn boundary far past the fraction (where a chain of overlapping turns first ends) would
  // drop much more than asked, as the whole history would: a cut through the turns nearer the
  // fraction is tried first, as a worker's is.
  const near = aligned < entries.length && aligned <= target * (1 + CLEAN_CUT_SLACK);
  if (aligned > 0 && (near || target >= entries.length)) return { count: aligned, held: NO_HELD };
  const through = throughCut(entries, target, limit, options);
  // It takes over only if it frees what must be freed, in fewer entries (emergency frees room
  // whatever the shape of the history).
  if (through && (aligned === 0 || (through.enough && through.count < aligned))) return { count: through.count, held: through.held };
  return { count: aligned, held: NO_HELD };
}

const NO_HELD: ReadonlySet<HistoryEntry> = new Set();
const NOTHING = { count: 0, held: NO_HELD };

/** The through-turns cut of `truncationCut`; undefined when none frees room. O(n). */
function throughCut(
  entries: readonly HistoryEntry[],
  target: number,
  limit: number,
  options: TruncationOptions,
): { count: number; held: ReadonlySet<HistoryEntry>; enough: boolean } | undefined {
  const lastIndex = new Map<number, number>();
  const turnTokens = new Map<number, number>();
  for (let index = 0; index < entries.length; index += 1) lastIndex.set(entries[index]!.turnId, index);
  const markerTokens = options.markerTokens ?? (() => 0);
  const mustFree = options.mustFree ?? 0;
  // Tokens a cut of `index + 1` frees: the turns that end before it (the others are held).
  let freed = 0;
  let best = 0;
  for (let index = 0; index < limit; index += 1) {
    const entry = entries[index]!;
    turnTokens.set(entry.turnId, (turnTokens.get(entry.turnId) ?? 0) + entry.tokens);
    if (lastIndex.get(entry.turnId) === index) freed += turnTokens.get(entry.turnId)!;
    const count = index + 1;
    if (count < target || count >= entries.length) continue;
    const net = freed - markerTokens(count);
    if (net > mustFree) return { ...withHeld(entries, count, lastIndex), enough: true };
    if (net > 0) best = count;
  }
  return best > 0 ? { ...withHeld(entries, best, lastIndex), enough: false } : undefined;
}

function withHeld(entries: readonly HistoryEntry[], count: number, lastIndex: ReadonlyMap<number, number>): { count: number; held: ReadonlySet<HistoryEntry> } {
  const held = new Set<HistoryEntry>();
  for (let index = 0; index < count; index += 1) if (lastIndex.get(entries[index]!.turnId)! >= count) held.add(entries[index]!);
  return { count, held };
}

/** The cut of `truncationCount` among the first `limit` entries; 0 when none there frees room. */
function cutWithin(entries: readonly HistoryEntry[], fraction: number, options: TruncationOptions, limit: number): number {
  const count = alignedCut(entries, targetCount(entries.length, fraction), limit);
  const { markerTokens } = options;
  if (count === 0 || markerTokens === undefined) return count;
  const mustFree = options.mustFree ?? 0;
  let dropped = 0;
  for (let index = 0; index < count; index += 1) dropped += entries[index]!.tokens;
  if (dropped - markerTokens(count) > mustFree) return count;
  const lastIndex = new Map<number, number>();
  for (let index = 0; index < entries.length; index += 1) lastIndex.set(entries[index]!.turnId, index);
  // The largest turn boundary so far whose cut frees room at all.
  let freeing = dropped > markerTokens(count) ? count : 0;
  // `count` is a turn boundary, so every turn before it ends before it.
  let reach = count - 1;
  for (let index = count; index < limit; index += 1) {
    dropped += entries[index]!.tokens;
    reach = Math.max(reach, lastIndex.get(entries[index]!.turnId)!);
    if (reach !== index) continue;
    const net = dropped - markerTokens(index + 1);
    if (net > mustFree) return index + 1;
    if (net > 0) freeing = index + 1;
  }
  return limit === entries.length ? entries.length : freeing;
}
