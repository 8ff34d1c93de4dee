import { renderTextFile, type ResolvedAttachment } from '../attachments/resolve-attachments.js';
import type { ChannelSettings } from '../config/types.js';
import { usableWindow } from '../context/calibration.js';
import { CHARS_PER_TOKEN, estimateEntryTokens, estimateTokens, MESSAGE_FRAMING_TOKENS } from '../context/token-estimate.js';
import type { HistoryEntry } from '../context/types.js';

/**
 * A message too large for the window (a 50,000-character paste into a small model) is still
 * part of its own turn: the request carries its beginning and a note saying how much was left
 * out, and its estimate is what that costs. History and the archive keep the full text, so it
 * stays searchable. The cap is recorded in the entry's `tokens` (estimated once, on append): an
 * entry whose text estimates above its `tokens` is sent cut to fit them.
 */

/** Share of the emergency room one message may take, so the rest of the turn still fits. */
const MESSAGE_SHARE = 0.5;
/** A cap is never smaller than this (tiny windows in tests). */
const MIN_CAP_TOKENS = 64;

/** Told to the model after the part of an oversized message it can see. */
export function oversizeNote(shown: number, total: number): string {
  return (
    `\n[This message is ${total.toLocaleString('en-US')} characters long, too long to read whole: only the first ` +
    `${shown.toLocaleString('en-US')} are shown here. The full text is archived and memory_search finds any part of it.]`
  );
}
/** The note is sized for the largest numbers it can hold. */
const NOTE_TOKENS = estimateTokens(oversizeNote(9_999_999_999, 9_999_999_999));

/**
 * The most tokens (uncalibrated) one message may cost in a request of this channel: a share of
 * the emergency room left beside the request's fixed part (`fixedTokens`, in real tokens: the
 * system prompt and tool definitions, which on a small window can take half of it), at the
 * messages' `factor`.
 */
export function messageCap(settings: Pick<ChannelSettings, 'contextWindow' | 'maxResponseTokens' | 'compaction'>, factor: number, fixedTokens = 0): number {
  const room = (settings.compaction.emergencyThreshold * usableWindow(settings) - Math.max(0, fixedTokens)) / factor;
  return Math.max(MIN_CAP_TOKENS, Math.floor(room * MESSAGE_SHARE));
}

/** The estimate an entry is stored with: its own, or the cap when it is over it. */
export function cappedEntryTokens(entry: Pick<HistoryEntry, 'kind' | 'authorName' | 'content'>, cap: number): number {
  const full = estimateEntryTokens(entry);
  return entry.kind === 'message' && full > cap ? cap : full;
}

/** Whether the request carries this entry cut (its text estimates above its stored tokens). */
export function isCapped(entry: Pick<HistoryEntry, 'kind' | 'authorName' | 'content' | 'tokens'>): boolean {
  return entry.kind === 'message' && estimateEntryTokens(entry) > entry.tokens;
}

/** How many characters of an entry a request shows: all of them unless it is capped. */
export function shownLength(entry: Pick<HistoryEntry, 'kind' | 'authorName' | 'content' | 'tokens'>): number {
  if (!isCapped(entry)) return entry.content.length;
  const framing = estimateEntryTokens({ ...entry, content: '' });
  let shown = Math.max(0, (entry.tokens - framing - NOTE_TOKENS) * CHARS_PER_TOKEN);
  // Not between the halves of a surrogate pair.
  const code = entry.content.charCodeAt(shown - 1);
  if (code >= 0xd800 && code <= 0xdbff) shown -= 1;
  return shown;
}

/** The text a request carries for an entry: whole, or its beginning plus the note. */
export function requestContent(entry: Pick<HistoryEntry, 'kind' | 'authorName' | 'content' | 'tokens'>): string {
  if (!isCapped(entry)) return entry.content;
  const shown = shownLength(entry);
  return entry.content.slice(0, shown) + oversizeNote(shown, entry.content.length);
}

/** What a placeholder adds to a message's text, at most, for each file (name, size, note). */
const PLACEHOLDER_TOKENS = 32;

/**
 * A message's files as they may go to the model: images as they are, text files cut so that
 * the message with all of them stays within `cap` (its own text costs `textTokens`). A file
 * larger than the window would otherwise make the turn being answered alone too big to send
 * (emergency truncation never drops it); cut, it carries the usual note saying how many of its
 * characters are shown (`renderTextFile`), and the placeholder in history says so as well.
 */
export function fitFiles(files: readonly ResolvedAttachment[], textTokens: number, cap: number): ResolvedAttachment[] {
  let room = cap - textTokens - PLACEHOLDER_TOKENS * files.length;
  for (const file of files) if (file.kind === 'image') room -= file.tokens;
  return files.map((file) => {
    if (file.kind !== 'text') return file;
    if (file.tokens <= room) {
      room -= file.tokens;
      return file;
    }
    const cut = cutTextFile(file, Math.max(0, room));
    room -= cut.tokens;
    return cut;
  });
}

type TextFile = Extract<ResolvedAttachment, { kind: 'text' }>;

/** The longest beginning of `file` whose rendering (note included) costs at most `tokens`. */
function cutTextFile(file: TextFile, tokens: number): TextFile {
  const costOf = (shown: number) =>
    estimateTokens(renderTextFile({ ...file, text: file.text.slice(0, shown), truncated: true, maxChars: shown })) + MESSAGE_FRAMING_TOKENS;
  let low = 0;
  let high = file.text.length;
  while (low < high) {
    const middle = (low + high + 1) >>> 1;
    if (costOf(middle) <= tokens) low = middle;
    else high = middle - 1;
  }
  // Not between the halves of a surrogate pair.
  const code = file.text.charCodeAt(low - 1);
  if (code >= 0xd800 && code <= 0xdbff) low -= 1;
  return { ...file, text: file.text.slice(0, low), truncated: true, maxChars: low, tokens: costOf(low) };
}
