/**
 * Shorter forms of a tool result, for a request that cannot carry it whole. What is kept is
 * always a beginning made of whole parts, followed by a note saying what was left out:
 *
 * - a JSON array (a `memory_search` answer, a worker's `channel_history`) keeps its first
 *   elements, which those tools put first for a reason (best match, newest message), and stays
 *   a JSON array, the note its last element: redaction after a delete parses tool results as
 *   JSON to find the messages they quote, so a shortened list must still parse;
 * - other JSON (an object, a string) is never cut: a cut one would no longer parse, and what it
 *   quotes could then escape redaction; such answers are small anyway, and are dropped instead;
 * - plain text keeps its first lines: a reader sees that the rest is missing and how much, which
 *   is sound for prose and logs. A single line is not cut (mid-line is mid-sentence or
 *   mid-record) and is dropped instead.
 */

/** What is put after the results kept of a list, as its last element. */
function listNote(leftOut: number): string {
  return `${leftOut} more result${leftOut === 1 ? '' : 's'} left out to fit the context window; a narrower query or a smaller limit may find more`;
}

/** What is put after the lines kept of a text, on a line of its own. */
function textNote(leftOut: number): string {
  return `[${leftOut} more line${leftOut === 1 ? '' : 's'} left out to fit the context window]`;
}

/**
 * The longest shortened form of `content` that `fits` (at least one whole element or line
 * kept), or undefined when none fits or the result cannot be cut soundly. `fits` is asked a few
 * times (a binary search over how many parts to keep), so it should be cheap.
 */
export function shortenToolResult(content: string, fits: (shortened: string) => boolean): string | undefined {
  const form = partsOf(content);
  if (!form || form.count < 2) return undefined;
  let best: string | undefined;
  // Longer with every part kept: the largest count that fits is found by halving.
  let low = 1;
  let high = form.count - 1;
  while (low <= high) {
    const keep = Math.floor((low + high) / 2);
    const candidate = form.keep(keep);
    if (fits(candidate)) {
      best = candidate;
      low = keep + 1;
    } else {
      high = keep - 1;
    }
  }
  return best;
}

interface Parts {
  count: number;
  /** The result with its first `count` parts and a note for the rest. */
  keep(count: number): string;
}

function partsOf(content: string): Parts | undefined {
  const trimmed = content.trim();
  if (trimmed.startsWith('[') || trimmed.startsWith('{') || trimmed.startsWith('"')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch {
      parsed = undefined;
    }
    if (Array.isArray(parsed)) {
      const items = parsed;
      return { count: items.length, keep: (count) => JSON.stringify([...items.slice(0, count), listNote(items.length - count)]) };
    }
    if (parsed !== undefined) return undefined;
  }
  const lines = content.split('\n');
  return { count: lines.length, keep: (count) => `${lines.slice(0, count).join('\n')}\n${textNote(lines.length - count)}` };
}
