/** Discord refuses messages longer than this many characters. */
export const DISCORD_MESSAGE_LIMIT = 2000;

const FENCE = '```';
/** Added at the end of a part whose code block is still open: the fence on a line of its own. */
const CLOSING = '\n```';
/** What an info string (the language after an opening fence) may hold; anything else is prose. */
const INFO_CHAR = /[\w+#.-]/;
/** Longest mention-like token (`<@123…>`, `<#…>`, `<:name:id>`) a hard cut steps back over. */
const MENTION_REACH = 80;

/**
 * One part of a chunked message, as it maps back onto the text: `text.slice(start, contentEnd)`
 * is what it carries of the text (whitespace at a cut is dropped, Discord trims it anyway),
 * `reopen` the fence line added in front (a code block open at the cut, with its info string),
 * `close` whether a closing fence line was added at the end.
 */
export interface ChunkPart {
  start: number;
  contentEnd: number;
  /** Next part starts here (or after whitespace dropped with a whitespace-only part). */
  end: number;
  reopen: string | undefined;
  close: boolean;
  /** The message as sent: `reopen + "\n"` + content + `"\n```"` when closed. */
  text: string;
}

/**
 * Splits a reply into messages of at most `limit` characters. Cuts fall on line boundaries when
 * that keeps a part at least half full (or the part has something besides fence lines), else
 * on a space, else anywhere: never inside a surrogate pair, a fence marker or a mention. A code
 * block open at a cut is closed at the end of that part and reopened, with its info string
 * (shortened when it would crowd the part out), at the start of the next, so every part has
 * balanced fences. Whitespace-only parts are dropped (Discord refuses empty messages).
 * Linear in the length of the text.
 */
export function chunkMessage(text: string, limit: number = DISCORD_MESSAGE_LIMIT): string[] {
  return chunkParts(text, limit).map((part) => part.text);
}

/** `chunkMessage` with how each part maps onto the text (for tests and streamed edits). */
export function chunkParts(text: string, limit: number = DISCORD_MESSAGE_LIMIT): ChunkPart[] {
  if (!Number.isInteger(limit) || limit < 32) throw new RangeError(`chunk limit must be an integer ≥ 32, got ${limit}`);
  const markers = fenceMarkers(text);
  const maxInfo = Math.floor(limit / 4) - FENCE.length - 1;
  const infoCache = new Map<number, string>();
  const infoOf = (marker: number): string => {
    let info = infoCache.get(marker);
    if (info === undefined) {
      info = infoString(text, marker).slice(0, maxInfo);
      infoCache.set(marker, info);
    }
    return info;
  };
  const end = trimmedEnd(text, 0, text.length);
  const openAtEnd = markers.length % 2 === 1;
  const parts: ChunkPart[] = [];
  let start = 0;
  let next = 0; // first marker at or after `start`
  let openMarker: number | undefined; // the marker whose block is open at `start`

  while (start < end) {
    const reopen = openMarker === undefined ? undefined : FENCE + infoOf(openMarker);
    const prefix = reopen === undefined ? 0 : reopen.length + 1;
    let cut: number;
    if (prefix + (end - start) + (openAtEnd ? CLOSING.length : 0) <= limit) {
      cut = text.length;
    } else {
      // Room for content; the closing line is reserved only when a block can be open at the cut.
      const mayClose = openMarker !== undefined || (next < markers.length && markers[next]! < start + limit);
      const room = limit - prefix - (mayClose ? CLOSING.length : 0);
      cut = cutPoint(text, start, room, markers, next);
    }
    while (next < markers.length && markers[next]! < cut) {
      openMarker = openMarker === undefined ? markers[next] : undefined;
      next += 1;
    }
    const contentEnd = trimmedEnd(text, start, Math.min(cut, end));
    const close = openMarker !== undefined;
    if (contentEnd > start) {
      const body = text.slice(start, contentEnd);
      parts.push({
        start,
        contentEnd,
        end: cut,
        reopen,
        close,
        text: `${reopen === undefined ? '' : `${reopen}\n`}${body}${close ? CLOSING : ''}`,
      });
    } else if (parts.length > 0) {
      parts[parts.length - 1]!.end = cut;
    }
    start = cut;
  }
  return parts;
}

/**
 * Where the part starting at `start` ends, given `room` characters for its content: after the
 * last newline that fits, then after the last space, then a hard cut. A newline cut is taken when
 * it fills at least half the room or leaves the part more than fence lines (a part holding only
 * an opening fence would render as an empty code block); a space cut when it fills half.
 */
function cutPoint(text: string, start: number, room: number, markers: readonly number[], next: number): number {
  const limit = start + room; // content is text[start, limit) at most
  for (const separator of ['\n', ' ']) {
    // Content ends before the separator, so the separator itself may sit at `limit`.
    const at = lastIndexBetween(text, separator, start, Math.min(limit, text.length - 1));
    if (at < 0) continue;
    // A short part is fine at a line end, never at a space inside a line that goes on.
    if (at - start > room / 2 || (separator === '\n' && !onlyFences(text, start, at))) {
      let cut = at + 1;
      // After a space cut the next part starts at a word, not at the rest of the gap.
      if (separator === ' ') while (cut < text.length && text[cut] === ' ') cut += 1;
      return cut;
    }
  }
  let cut = limit;
  // Not inside a fence marker: that would change what the marker scan sees in both parts.
  let index = next;
  while (index < markers.length && markers[index]! + FENCE.length <= cut) index += 1;
  if (index < markers.length && markers[index]! < cut) cut = markers[index]!;
  // Not between the halves of a surrogate pair (an astral character).
  if (isHighSurrogate(text.charCodeAt(cut - 1)) && isLowSurrogate(text.charCodeAt(cut))) cut -= 1;
  // Not inside a mention or custom emoji, which would render as raw text in both parts.
  const open = lastIndexBetween(text, '<', Math.max(start, cut - MENTION_REACH), cut - 1);
  if (open > start + room / 2 && isMentionStart(text, open, cut)) cut = open;
  return cut;
}

/** Start index of every fence marker, scanning left to right without overlaps. */
function fenceMarkers(text: string): number[] {
  const markers: number[] = [];
  for (let at = text.indexOf(FENCE); at >= 0; at = text.indexOf(FENCE, at + FENCE.length)) markers.push(at);
  return markers;
}

/**
 * The info string of the fence marker at `marker`: the word after it when nothing else follows
 * on its line (`` ```ts ``), else nothing (`` ``` shell session `` is prose after a bare fence).
 * Stops at the first character that cannot belong to it, so scans of markers on one line do not
 * overlap and the whole text is scanned at most once.
 */
function infoString(text: string, marker: number): string {
  let index = marker + FENCE.length;
  while (index < text.length && (text[index] === ' ' || text[index] === '\t')) index += 1;
  const from = index;
  while (index < text.length && INFO_CHAR.test(text[index]!)) index += 1;
  const to = index;
  while (index < text.length && (text[index] === ' ' || text[index] === '\t' || text[index] === '\r')) index += 1;
  return index === text.length || text[index] === '\n' ? text.slice(from, to) : '';
}

/** Whether text[from, to) holds nothing but whitespace and fence markers with their info. */
function onlyFences(text: string, from: number, to: number): boolean {
  return text.slice(from, to).replace(/```[\w+#.-]*/g, '').trim() === '';
}

function lastIndexBetween(text: string, char: string, from: number, to: number): number {
  for (let index = to; index >= from; index -= 1) if (text[index] === char) return index;
  return -1;
}

/** End of text[from, to) without its trailing whitespace. */
function trimmedEnd(text: string, from: number, to: number): number {
  let index = to;
  while (index > from && /\s/.test(text[index - 1]!)) index -= 1;
  return index;
}

/** `<@id>`, `<@!id>`, `<@&id>`, `<#id>`, `<:name:id>`, `<a:name:id>` still open at `cut`. */
function isMentionStart(text: string, open: number, cut: number): boolean {
  const head = text.slice(open, cut);
  return /^<(@[!&]?|#|a?:)[\w:]*$/.test(head);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
