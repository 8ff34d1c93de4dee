/** Discord refuses messages longer than this many characters. */
export const DISCORD_MESSAGE_LIMIT = 2000;

const FENCE_CLOSE = '```';

/**
 * Splits a reply into messages of at most `limit` characters. Cuts fall on line boundaries
 * when possible, else on word boundaries, else anywhere (never inside a surrogate pair). A code
 * fence open at a cut is closed at the end of that chunk and reopened, with its language, at
 * the start of the next one, so every chunk renders as the reader expects. Whitespace-only
 * chunks are dropped (Discord refuses empty messages).
 */
export function chunkMessage(text: string, limit: number = DISCORD_MESSAGE_LIMIT): string[] {
  if (!Number.isInteger(limit) || limit < 32) throw new RangeError(`chunk limit must be an integer ≥ 32, got ${limit}`);
  const chunks: string[] = [];
  let lines: string[] = [];
  let length = 0; // of lines.join('\n')
  let hasContent = false; // anything besides a reopened fence
  let openFence: string | undefined;

  const append = (line: string): void => {
    length += (lines.length > 0 ? 1 : 0) + line.length;
    lines.push(line);
  };
  const flush = (): void => {
    const body = openFence === undefined ? lines.join('\n') : `${lines.join('\n')}\n${FENCE_CLOSE}`;
    if (hasContent && body.trim().length > 0) chunks.push(body);
    lines = [];
    length = 0;
    hasContent = false;
    if (openFence !== undefined) append(openFence);
  };
  /** Room left for a line if it were appended now, keeping space to close a fence. */
  const roomFor = (fenceAfter: string | undefined): number =>
    limit - length - (lines.length > 0 ? 1 : 0) - (fenceAfter === undefined ? 0 : FENCE_CLOSE.length + 1);

  for (const line of text.split('\n')) {
    const fenceAfter = fenceStateAfter(line, openFence);
    if (line.length <= roomFor(fenceAfter)) {
      append(line);
      hasContent = true;
      openFence = fenceAfter;
      continue;
    }
    if (hasContent) {
      flush();
      if (line.length <= roomFor(fenceAfter)) {
        append(line);
        hasContent = true;
        openFence = fenceAfter;
        continue;
      }
    }
    // One line longer than a whole chunk: cut it on word boundaries.
    let rest = line;
    while (rest.length > roomFor(fenceAfter)) {
      const room = roomFor(openFence);
      const cut = cutPoint(rest, room);
      append(rest.slice(0, cut));
      hasContent = true;
      flush();
      rest = rest.slice(cut).replace(/^ +/, '');
    }
    append(rest);
    hasContent = hasContent || rest.length > 0;
    openFence = fenceAfter;
  }
  // An unbalanced fence in the text itself is closed in its last chunk.
  flush();
  return chunks;
}

/**
 * Whether a code fence is open after `line`, and how to reopen it. A line holding an even number
 * of fence markers (```sh ls```) opens and closes on itself; an odd number toggles wherever the
 * marker sits, so a code line that ends in the marker closes the fence too. Only the marker and
 * its language are repeated when a fence is reopened, never text that followed them on that line.
 */
function fenceStateAfter(line: string, openFence: string | undefined): string | undefined {
  const markers = line.split(FENCE_CLOSE).length - 1;
  if (markers % 2 === 0) return openFence;
  if (openFence !== undefined) return undefined;
  const language = /^[\w+#.-]*$/.exec(line.slice(line.lastIndexOf(FENCE_CLOSE) + FENCE_CLOSE.length).trim());
  return `${FENCE_CLOSE}${language?.[0] ?? ''}`;
}

/** Where to cut a too-long line so the first part fits in `room` characters. */
function cutPoint(line: string, room: number): number {
  const window = line.slice(0, room + 1);
  const space = window.lastIndexOf(' ');
  if (space > room / 2) return space;
  let cut = Math.max(1, room);
  const code = line.charCodeAt(cut - 1);
  if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
  return cut;
}
