import type { FullText, FullTextFilter } from './full-text.js';
import type { ItemRow, ItemRows } from './item-rows.js';
import { queryTerms, searchTokens } from './search-text.js';

/** How long a word's store-wide document count is trusted before it is counted again. */
const COUNT_TTL_MS = 30_000;
const MAX_CACHED_COUNTS = 20_000;
/** Hits whose text is read at a time when checking that more than names matched: the first few nearly always settle it. */
const CHECK_SLICE = 8;

export interface TextHit {
  label: number;
  strength: number;
}

export interface TextMatch {
  hits: TextHit[];
  /**
   * The query's words met only names (or times) while it asks about something else: there is
   * nothing to show, and a vector close to the name is no better.
   */
  offTopic: boolean;
}

/**
 * The full-text side of a search: the query's words chosen so the cost stays bounded, ranked
 * by BM25 within the caller's filter, and dropped altogether when they only met the names of
 * the people who wrote the messages while the query asked about something else.
 */
export class TextCandidates {
  /** Document counts of terms, refreshed after a while: only used to bound query cost. */
  private readonly termCountCache = new Map<string, { count: number; at: number }>();

  constructor(
    private readonly fullText: FullText,
    private readonly rows: ItemRows,
    private readonly postingBudget: number,
  ) {}

  /**
   * `timeWords`: the words of the query that name a time ("yesterday"), which may be among the
   * query's words but are never what it is about.
   */
  async find(queryText: string, timeWords: string, filter: FullTextFilter, count: number): Promise<TextMatch> {
    const query = queryTerms(queryText);
    const { terms, counts, unaffordable } = await this.affordableTerms(query.terms);
    if (terms.length === 0) return { hits: [], offTopic: false };
    const hits = await this.fullText.candidates(terms, filter, count, this.postingBudget, counts);
    const incidental = new Set(searchTokens(timeWords));
    const about = (list: readonly string[]): string[] => list.filter((term) => !incidental.has(term));
    // A word the query is about that was left out for its cost (said in too many messages to
    // rank) may well be in these hits: not knowing, the hits stand.
    const topical = about(query.topical);
    if (topical.length === 0 || topical.some((term) => unaffordable.has(term))) return { hits, offTopic: false };
    return (await this.onlyNamesMatched(hits, about(terms), topical)) ? { hits: [], offTopic: true } : { hits, offTopic: false };
  }

  /**
   * True when no hit says any of the terms (each matched through its author's name, which is
   * indexed with every message, or through a word of time) and the query is about something
   * besides those people: "what did Ben say about the database" in a channel where nobody
   * mentioned a database would otherwise list whatever Ben said, and "xyzzy yesterday" every
   * message saying "yesterday". A query about the person alone ("what did Ben say") keeps its
   * hits.
   */
  private async onlyNamesMatched(hits: readonly TextHit[], terms: readonly string[], topical: readonly string[]): Promise<boolean> {
    if (hits.length === 0) return false;
    const wanted = new Set(terms);
    const names = new Set<string>();
    let read = 0;
    // The first few hits nearly always settle it; the rest, when needed, in one more read.
    for (const slice of [hits.slice(0, CHECK_SLICE), hits.slice(CHECK_SLICE)]) {
      if (slice.length === 0) break;
      const rows = await this.rows.load(slice.map((hit) => hit.label));
      read += rows.size;
      for (const row of rows.values()) {
        if (searchTokens(ownText(row)).some((token) => wanted.has(token))) return false;
        for (const token of searchTokens(row.author_name ?? '')) names.add(token);
      }
      // Asked about these people alone: their lines are the answer.
      if (topical.every((term) => names.has(term))) return false;
    }
    // Hits whose rows are gone (deleted since) prove nothing either way: they stand, as before.
    return read > 0;
  }

  /**
   * The rarest terms whose postings fit the budget, with their counts; terms found nowhere are
   * dropped, and those found but over the budget are named apart.
   */
  private async affordableTerms(terms: string[]): Promise<{ terms: string[]; counts: number[]; unaffordable: Set<string> }> {
    const everyCount = await this.termCounts(terms);
    const counted = terms
      .map((term, position) => ({ term, count: everyCount[position]! }))
      .filter((entry) => entry.count > 0)
      .sort((left, right) => left.count - right.count);
    const chosen: string[] = [];
    const counts: number[] = [];
    const unaffordable = new Set<string>();
    let postings = 0;
    for (const entry of counted) {
      if (unaffordable.size > 0 || (chosen.length > 0 && postings + entry.count > this.postingBudget)) {
        unaffordable.add(entry.term);
        continue;
      }
      chosen.push(entry.term);
      counts.push(entry.count);
      postings += entry.count;
    }
    return { terms: chosen, counts, unaffordable };
  }

  /**
   * Document counts of the terms, from the cache where it is fresh, the rest in one go. Only
   * words found somewhere are cached: a word searched before anyone said it is counted again
   * next time, or it would stay unsearchable for the cache's lifetime after it was first said.
   */
  private async termCounts(terms: string[]): Promise<number[]> {
    const now = performance.now();
    if (this.termCountCache.size > MAX_CACHED_COUNTS) this.termCountCache.clear();
    const fresh = (term: string): boolean => {
      const cached = this.termCountCache.get(term);
      return cached !== undefined && now - cached.at < COUNT_TTL_MS;
    };
    // Kept apart from the cache, which a concurrent search may clear while this one waits.
    const known = new Map<string, number>();
    for (const term of terms) if (fresh(term)) known.set(term, this.termCountCache.get(term)!.count);
    const missing = terms.filter((term) => !known.has(term));
    if (missing.length > 0) {
      const counts = await this.fullText.termCounts(missing);
      missing.forEach((term, position) => {
        known.set(term, counts[position]!);
        if (counts[position]! > 0) this.termCountCache.set(term, { count: counts[position]!, at: now });
      });
    }
    return terms.map((term) => known.get(term)!);
  }
}

/** What a row says, without the "Author: " its archived text starts with. */
function ownText(row: ItemRow): string {
  const prefix = row.author_name ? `${row.author_name}: ` : '';
  return prefix && row.content.startsWith(prefix) ? row.content.slice(prefix.length) : row.content;
}
