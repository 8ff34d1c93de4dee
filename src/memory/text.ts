/**
 * Text normalization for the hashing embedder, the function words that search ignores, and
 * small hashing helpers. The full-text tokens are made in `search-text.ts`.
 */

/**
 * Common English function words. They carry little meaning, match nearly every chat message,
 * and would make a BM25 OR-query rank most of the archive; they are removed from queries and
 * weighted down in embeddings.
 */
export const STOP_WORDS: ReadonlySet<string> = new Set(
  (
    'a about above after again against all am an and any are as at be because been before being ' +
    'below between both but by can could did do does doing down during each few for from further ' +
    'had has have having he her here hers herself him himself his how i if in into is it its itself ' +
    'just me more most my myself no nor not now of off on once only or other our ours ourselves out ' +
    'over own same she should so some such than that the their theirs them themselves then there ' +
    'these they this those through to too under until up very was we were what when where which ' +
    'while who whom why will with would you your yours yourself yourselves also get got im ive ' +
    'dont didnt doesnt isnt wasnt cant wont thats whats youre theyre lets yes yeah oh ok okay really ' +
    'much many one us would thing things kind sort like well still even ever'
  ).split(/\s+/),
);

/** Lowercases, applies NFKC, turns punctuation into spaces and drops apostrophes inside words. */
export function normalizeText(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .replace(/['’`]/g, '')
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/** Normalized words of a text, in order (stop words included). */
export function words(text: string): string[] {
  const normalized = normalizeText(text);
  return normalized.length === 0 ? [] : normalized.split(' ');
}

/**
 * An FTS5 expression matching any of the terms. Each term is double-quoted (quotes doubled), so
 * no user text can be read as FTS5 syntax; returns undefined when nothing is left to match.
 */
export function ftsAnyOf(terms: readonly string[]): string | undefined {
  if (terms.length === 0) return undefined;
  return terms.map((term) => `"${term.replace(/"/g, '""')}"`).join(' OR ');
}

/** 32-bit FNV-1a of a string's UTF-16 code units; fast and stable across runs. */
export function fnv1a(text: string, seed = 0x811c9dc5): number {
  let hash = seed;
  for (let index = 0; index < text.length; index += 1) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** A token made of letters and digits only (so FTS5 keeps it whole) naming an opaque value. */
export function tagToken(prefix: string, value: string): string {
  return `${prefix}${fnv1a(value).toString(36)}x${fnv1a(value, 0x9747b28c).toString(36)}`;
}
