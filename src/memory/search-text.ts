import { stemmer } from 'stemmer';
import { STOP_WORDS } from './text.js';

/**
 * The words full-text search indexes and matches, computed here rather than by the database, so
 * that SQLite (FTS5) and PostgreSQL (tsvector) index exactly the same tokens and give the same
 * answers. Every token is a run of letters, digits and the marks on those letters, lowercased;
 * the stored form is the tokens joined by single spaces, which FTS5's `unicode61` tokenizer and
 * PostgreSQL's `simple` configuration both read back as the same tokens.
 *
 * - English words are stemmed (Porter, as FTS5's `porter` tokenizer did), so "parties" meets "party".
 * - Function words are left out: they match nearly every message and mean nothing to a search.
 * - Scripts written without spaces (Chinese, Japanese, Korean, Thai, Lao, Khmer, Myanmar) become
 *   overlapping pairs of characters, so any word of two or more characters finds the messages
 *   that contain it, with no dictionary to download.
 * - An identifier written with connectors (`BILL-4821`, `v2.3.1`, `user@host`, `snake_case_name`)
 *   gives its parts and also the parts joined into one rare token, which makes the exact
 *   identifier rank first while "BILL 4821" or "4821" still find it.
 */

/** Scripts written without spaces between words. */
const UNSPACED_CLASS = ['Han', 'Hiragana', 'Katakana', 'Hangul', 'Thai', 'Lao', 'Khmer', 'Myanmar']
  .map((script) => `\\p{Script_Extensions=${script}}`)
  .join('');
const UNSPACED = new RegExp(`[${UNSPACED_CLASS}]`, 'u');
/** Consecutive characters of unspaced scripts, each with its marks. */
const UNSPACED_RUNS = new RegExp(`(?:[${UNSPACED_CLASS}]\\p{M}*)+`, 'gu');
/** A base character with the marks that belong to it: the unit of a character pair. */
const UNIT = /\P{M}\p{M}*/gu;
/** Accents that search ignores: those on Latin, Greek, Cyrillic, Arabic and Hebrew letters. */
const FOLDED_MARKS = /([\p{Script=Latin}\p{Script=Greek}\p{Script=Cyrillic}\p{Script=Arabic}\p{Script=Hebrew}])\p{Mn}+/gu;
/** Marks with no letter to sit on (emoji variation selectors, keycaps) are not text. */
const STRAY_MARKS = /(?<![\p{L}\p{M}])\p{M}+/gu;
const PART = /[\p{L}\p{N}\p{M}]+/gu;
/** A chunk that is one run of ASCII letters and digits, the common case. */
const PLAIN_WORD = /^[a-z0-9]+$/;
/** What may join the parts of one identifier. */
const CONNECTED = /^[\p{L}\p{N}\p{M}]+(?:[-_.@/:+#][\p{L}\p{N}\p{M}]+)+$/u;
const ENGLISH_WORD = /^[a-z]+$/;
const HAS_LETTER = /\p{L}/u;
const HAS_DIGIT = /\p{N}/u;
/** A word that may be half of a closed compound: letters of a spaced script, two or more. */
const JOINABLE = /^\p{L}[\p{L}\p{M}]+$/u;

/** Tokens longer than this (hashes, base64, runs of one key) are not words anyone searches for. */
const MAX_TOKEN_LENGTH = 64;
/** An identifier joined from more parts or characters than this is a URL or a path, not a name. */
const MAX_JOINED_PARTS = 6;
const MAX_JOINED_LENGTH = 40;

/** Lowercased, compatibility-normalized, accents folded; apostrophes inside words dropped. */
function normalize(text: string): string {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .normalize('NFD')
    .replace(FOLDED_MARKS, '$1')
    .normalize('NFC')
    .replace(STRAY_MARKS, '')
    .replace(/['’`]/g, '')
    .replace(/ς/g, 'σ');
}

/** The search tokens of a text, in order, repeats kept (they are term frequency). */
export function searchTokens(text: string): string[] {
  const tokens: string[] = [];
  for (const chunk of normalize(text).split(/\s+/)) {
    // Most chunks are one plain word: no parts to find, no identifier to join.
    if (PLAIN_WORD.test(chunk)) {
      addWord(chunk, tokens);
      continue;
    }
    const parts = chunk.match(PART);
    if (!parts) continue;
    for (const part of parts) addPart(part, tokens);
    if (parts.length > 1) {
      const joined = joinedIdentifier(chunk, parts);
      if (joined) tokens.push(joined);
    }
  }
  return tokens;
}

/** The text stored for the full-text index: the tokens, one space apart. */
export function searchText(text: string): string {
  return searchTokens(text).join(' ');
}

/**
 * Words that shape a question rather than say what it is about ("what might Ana likely say
 * about...", "what did we talk about yesterday"): left out of queries. Messages keep them,
 * since there they can carry meaning.
 */
const QUESTION_WORDS: ReadonlySet<string> = new Set(
  'likely unlikely might probably possibly perhaps considered consider based describe mention mentioned something anything someone anyone happen happened discuss discussed talk talked say said tell told'
    .split(' ')
    .map((word) => stemmer(word)),
);

/** What a query looks up, and which of it the query is about. */
export interface QueryTerms {
  /** Every term to look up: the query's own words, then other spellings and joined neighbours. */
  terms: string[];
  /** The query's own words, question words left out: what a message must say to answer it. */
  topical: string[];
}

/**
 * The distinct tokens of a query, at most `maxTerms` of them, in order of appearance, then the
 * query's neighbouring words written as one ("ice cream" → `icecream`, "Kaffee Maschine" →
 * `kaffeemaschin`), so a closed compound in a message is found by its words apart. A joined
 * word no message contains is dropped by the search before it costs anything.
 */
export function queryTerms(text: string, options: { maxTerms?: number } = {}): QueryTerms {
  const terms = [...new Set(searchTokens(text))];
  const topical = terms.filter((term) => !QUESTION_WORDS.has(term));
  const chosen = topical.length > 0 ? topical : terms;
  const extra = [...joinedNeighbours(text), ...otherSpellings(text)].filter((term) => !chosen.includes(term));
  return { terms: [...chosen, ...new Set(extra)].slice(0, options.maxTerms ?? 32), topical };
}

export function searchTerms(text: string, options: { maxTerms?: number } = {}): string[] {
  return queryTerms(text, options).terms;
}

/** True when a text has no word a message would need to say to answer it (only question and function words, or none). */
export function onlyQuestion(text: string): boolean {
  return searchTokens(text).every((token) => QUESTION_WORDS.has(token));
}

/**
 * The other form an identifier may be indexed under. A joined identifier is stored as written
 * (`max_upload_bytes` → `maxuploadbytes`), while the same letters typed as one word, or in
 * camelCase (`maxUploadBytes`), are an English-looking word and stored stemmed
 * (`maxuploadbyt`). A query looks for both forms, so each spelling finds the other.
 */
function otherSpellings(text: string): string[] {
  const spellings: string[] = [];
  // A word typed whole is stored stemmed; the same letters joined from parts are stored as typed.
  const unstemmed = (word: string): void => {
    if (ENGLISH_WORD.test(word) && !STOP_WORDS.has(word) && word.length <= MAX_JOINED_LENGTH && stem(word) !== word) spellings.push(word);
  };
  for (const chunk of normalize(text).split(/\s+/)) {
    if (PLAIN_WORD.test(chunk)) {
      unstemmed(chunk);
      continue;
    }
    const parts = chunk.match(PART);
    if (parts?.length === 1) {
      // One word with punctuation around it ("maxUploadBytes?").
      unstemmed(parts[0]!);
      continue;
    }
    const joined = parts && parts.length > 1 ? joinedIdentifier(chunk, parts) : undefined;
    if (joined && ENGLISH_WORD.test(joined) && stem(joined) !== joined) spellings.push(stem(joined));
  }
  return spellings;
}

function joinable(word: string): boolean {
  return JOINABLE.test(word) && !UNSPACED.test(word) && !STOP_WORDS.has(word);
}

/** Two neighbouring words of spaced scripts, neither a function word, as the one token they would make. */
function joinedNeighbours(text: string): string[] {
  const words = normalize(text).match(PART) ?? [];
  const joined: string[] = [];
  for (let index = 0; index + 1 < words.length; index += 1) {
    const [left, right] = [words[index]!, words[index + 1]!];
    if (!joinable(left) || !joinable(right)) continue;
    const tokens: string[] = [];
    addWord(left + right, tokens);
    joined.push(...tokens);
  }
  return joined;
}

function addPart(part: string, tokens: string[]): void {
  if (!UNSPACED.test(part)) addWord(part, tokens);
  else for (const piece of splitUnspaced(part)) piece.pair ? tokens.push(piece.text) : addWord(piece.text, tokens);
}

/**
 * A word split where an unspaced script runs through it: those runs become character pairs (a
 * lone character stays as it is); letters of other scripts between them ("iphone15の発売") stay
 * words. The hashing embedder uses the same pairs, so both sides of search see the same words.
 */
export function splitUnspaced(word: string): Array<{ text: string; pair: boolean }> {
  if (!UNSPACED.test(word)) return [{ text: word, pair: false }];
  const pieces: Array<{ text: string; pair: boolean }> = [];
  let last = 0;
  for (const run of word.matchAll(UNSPACED_RUNS)) {
    if (run.index > last) pieces.push({ text: word.slice(last, run.index), pair: false });
    const units = run[0].match(UNIT) ?? [];
    if (units.length === 1) pieces.push({ text: units[0]!, pair: true });
    for (let index = 0; index + 1 < units.length; index += 1) pieces.push({ text: units[index]! + units[index + 1]!, pair: true });
    last = run.index + run[0].length;
  }
  if (last < word.length) pieces.push({ text: word.slice(last), pair: false });
  return pieces;
}

function addWord(word: string, tokens: string[]): void {
  if (word.length > MAX_TOKEN_LENGTH) return;
  if (STOP_WORDS.has(word)) return;
  // A lone letter is an initial or a typo; a lone digit is a number someone may look for.
  if (word.length === 1 && !HAS_DIGIT.test(word)) return;
  tokens.push(ENGLISH_WORD.test(word) ? stem(word) : word);
}

/** Stems of words seen lately: chat repeats its words, and stemming each anew was a few per cent of ingest. */
const STEMS = new Map<string, string>();
const MAX_STEMS = 50_000;

function stem(word: string): string {
  let stemmed = STEMS.get(word);
  if (stemmed === undefined) {
    stemmed = stemmer(word);
    if (STEMS.size >= MAX_STEMS) STEMS.clear();
    STEMS.set(word, stemmed);
  }
  return stemmed;
}

/** `bill-4821` → `bill4821`: only for chunks that read as one identifier with letters in it. */
function joinedIdentifier(chunk: string, parts: string[]): string | undefined {
  if (parts.length > MAX_JOINED_PARTS) return undefined;
  const trimmed = chunk.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}\p{M}]+$/gu, '');
  if (!CONNECTED.test(trimmed)) return undefined;
  if (parts.some((part) => UNSPACED.test(part))) return undefined;
  const joined = parts.join('');
  if (joined.length > MAX_JOINED_LENGTH) return undefined;
  const lettered = parts.filter((part) => HAS_LETTER.test(part)).length;
  const numbered = parts.some((part) => HAS_DIGIT.test(part));
  // Dates and decimals ("2023-10-03", "10.5") are numbers, not names: joining them would make
  // "105" out of "10.5".
  if (lettered === 0 || (lettered === 1 && !numbered)) return undefined;
  return joined;
}
