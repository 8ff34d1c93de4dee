/**
 * Finding where a text quotes another one, loosely: a reply or a tool result rarely repeats a
 * message byte for byte (line breaks become spaces, a sentence starts lower-case, a quote is
 * cut short). Both sides are compared with whitespace runs collapsed and letters lower-cased;
 * any stretch of at least `minLength` such characters that the source also holds is a quote.
 */

/** Shorter common stretches are coincidence ("in the meeting on "), not quotation. */
export const MIN_QUOTE_LENGTH = 20;

interface Normalized {
  text: string;
  /** `origin[i]`: index in the original text of normalized character i. */
  origin: number[];
}

/** Whitespace runs become one space, letters lower case; remembers where each character came from. */
function normalize(text: string): Normalized {
  let normalized = '';
  const origin: number[] = [];
  let spaced = true;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index]!;
    if (/\s/.test(char)) {
      if (!spaced) {
        normalized += ' ';
        origin.push(index);
        spaced = true;
      }
      continue;
    }
    spaced = false;
    const lower = char.toLowerCase();
    // A character whose lower case is longer (rare) keeps one origin for each of its parts.
    for (let part = 0; part < lower.length; part += 1) origin.push(index);
    normalized += lower;
  }
  return { text: normalized, origin };
}

/** The sources' every stretch of `minLength` normalized characters, built once for many texts. */
export interface QuoteIndex {
  grams: ReadonlySet<string>;
  minLength: number;
}

export function quoteIndex(sources: readonly string[], minLength = MIN_QUOTE_LENGTH): QuoteIndex {
  const grams = new Set<string>();
  for (const source of sources) {
    const normalized = normalize(source).text;
    for (let start = 0; start + minLength <= normalized.length; start += 1) grams.add(normalized.slice(start, start + minLength));
  }
  return { grams, minLength };
}

/**
 * The stretches of `text` (as [start, end) in its own indices, ascending, merged) that quote one
 * of the indexed sources, at least `minLength` normalized characters long.
 */
export function quotedSpans(text: string, index: QuoteIndex): Array<[number, number]> {
  const { grams, minLength } = index;
  if (grams.size === 0 || text.length < minLength) return [];
  const target = normalize(text);
  const spans: Array<[number, number]> = [];
  for (let start = 0; start + minLength <= target.text.length; start += 1) {
    if (!grams.has(target.text.slice(start, start + minLength))) continue;
    const from = target.origin[start]!;
    const to = target.origin[start + minLength - 1]! + 1;
    const last = spans[spans.length - 1];
    // Overlapping or touching windows form one quote.
    if (last && from <= last[1]) last[1] = Math.max(last[1], to);
    else spans.push([from, to]);
  }
  return spans;
}

/** `text` with every quote of the indexed sources replaced by `note`; the same string when nothing quotes them. */
export function redactQuotes(text: string, index: QuoteIndex, note: string): string {
  const spans = quotedSpans(text, index);
  if (spans.length === 0) return text;
  let result = '';
  let at = 0;
  for (let [from, to] of spans) {
    // The whitespace around a quote stays: it separates the note from the words beside it.
    while (from < to && /\s/.test(text[from]!)) from += 1;
    while (to > from && /\s/.test(text[to - 1]!)) to -= 1;
    result += text.slice(at, from) + note;
    at = to;
  }
  return result + text.slice(at);
}
