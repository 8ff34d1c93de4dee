import type { SqlClient } from '../storage/sql-client.js';
import { filterSql, type FullText, type FullTextFilter } from './full-text.js';

/** BM25 constants, those of FTS5's bm25(). */
const K1 = 1.2;
const B = 0.75;

/** Store-wide row count and average length, refreshed now and then (they move slowly). */
interface CorpusStats {
  rows: number;
  averageLength: number;
  /** The largest rowid when counted: rows added since are counted from it, exactly. */
  top: number;
  at: number;
  tookMs: number;
}

/** Least time between two readings of the store's statistics. */
const STATS_MIN_AGE_MS = 30_000;
/** Above this many rows (the planner's estimate) the store's average length is sampled, not read whole. */
const EXACT_COUNT_ROWS = 50_000;
/** Rows a sample aims at. */
const SAMPLE_ROWS = 20_000;
/** Matches beyond this many times `scan` are read from the newest part of the table only. */
const BOUNDED_AT = 2;
/** That part is sized to hold this many times `scan` visible matches, by the estimate. */
const BOUNDED_MARGIN = 2;
/** Past this share of the table, the bound saves too little to risk a second statement. */
const BOUNDED_MOST = 0.5;
/** Filters whose share of the matches is kept (a filter is a scope: a handful in a process). */
const SHARES_KEPT = 256;

interface RankedRows {
  rows: Array<{ label: number; strength: number }>;
  /** Matching rows read, and how many of them the filter let through (the newest `scan` of those were ranked). */
  read: number;
  visible: number;
}

/**
 * PostgreSQL: `memory_items.fts` (a tsvector of the row's search tokens, `simple` configuration:
 * the tokens are indexed as FTS5 indexes them) under a GIN index, ranked by the
 * BM25 that FTS5's bm25() computes, so strengths (and the fusion tuned on them) mean the same on
 * both backends: IDF from store-wide document frequencies, term frequencies from the tsvector's
 * positions, length normalized by the store's average. One statement per search as a rule (the
 * terms' document frequencies come from the caller's counts), two when a bounded read of the
 * newest rows fell short; the store's row count and average length are cached, the count
 * advanced by the rowids added since.
 */
export class PgFullText implements FullText {
  private stats: CorpusStats | undefined;
  /** Each filter's share of the matches its last search read (its scope among the rows that match). */
  private readonly shares = new Map<string, number>();

  constructor(private readonly db: SqlClient) {}

  async termCounts(terms: readonly string[]): Promise<number[]> {
    if (terms.length === 0) return [];
    const rows = (await this.db
      .prepare(
        `SELECT (SELECT count(*) FROM memory_items m WHERE m.fts @@ plainto_tsquery('simple', t.term)) AS count
           FROM json_array_elements_text(?::json) WITH ORDINALITY AS t(term, position) ORDER BY t.position`,
      )
      .all(JSON.stringify(terms))) as Array<{ count: number }>;
    return rows.map((row) => row.count);
  }

  async candidates(
    terms: readonly string[],
    filter: FullTextFilter,
    count: number,
    scan: number,
    counts?: readonly number[],
  ): Promise<Array<{ label: number; strength: number }>> {
    if (terms.length === 0) return [];
    // Counting a word's rows reads every one of them: the caller's counts are used when it has
    // them (the search counts its terms first to choose them), so no search counts twice.
    const frequencies = counts?.length === terms.length ? counts : await this.termCounts(terms);
    const stats = await this.corpusStats();
    const { sql: filterClause, params } = filterSql(filter);
    const json = JSON.stringify(terms.map((term, position) => ({ position, term, hits: frequencies[position] })));
    const rank = (floor: number | undefined): Promise<RankedRows> =>
      this.rank(filterClause, [json, stats.rows, stats.top, ...params, ...(floor === undefined ? [] : [floor]), scan, stats.averageLength, count], floor !== undefined);
    // Matches far beyond the `scan` newest: only the newest part of the table is read, sized to
    // hold about twice `scan` visible matches. Holding at least `scan` of them, it holds exactly
    // the `scan` newest anywhere, the rows ranked without the bound; holding fewer, the statement
    // runs again without it.
    const shareKey = `${filterClause}\u0000${JSON.stringify(params)}`;
    const floor = this.newestFloor(frequencies, scan, stats, shareKey);
    if (floor !== undefined) {
      const bounded = await rank(floor);
      this.noteShare(shareKey, bounded);
      if (bounded.visible >= scan) return bounded.rows;
    }
    const whole = await rank(undefined);
    this.noteShare(shareKey, whole);
    return whole.rows;
  }

  /**
   * The lowest rowid worth reading when the query's words match many more rows than `scan`, or
   * undefined when the whole table must be read. Matches are taken as spread evenly over the
   * rowids, and as visible to this filter in the share its last search saw (all, at first).
   */
  private newestFloor(frequencies: readonly number[], scan: number, stats: CorpusStats, shareKey: string): number | undefined {
    const matches = frequencies.reduce((sum, hits) => sum + hits, 0);
    if (matches <= BOUNDED_AT * scan || stats.top <= 0) return undefined;
    const visible = matches * (this.shares.get(shareKey) ?? 1);
    const fraction = (BOUNDED_MARGIN * scan) / Math.max(1, visible);
    if (fraction >= BOUNDED_MOST) return undefined;
    return Math.floor(stats.top * (1 - fraction));
  }

  /** Remembers the share of a search's matches its filter let through, for the next search. */
  private noteShare(shareKey: string, outcome: RankedRows): void {
    if (outcome.read === 0) return;
    if (!this.shares.has(shareKey) && this.shares.size >= SHARES_KEPT) this.shares.clear();
    this.shares.set(shareKey, outcome.visible / outcome.read);
  }

  /**
   * BM25 over the `scan` newest visible matches (`bounded`: with a rowid above the floor), and how
   * many matches were read and visible. Each distinct lexeme of the query is one BM25 term, weighted by its
   * store-wide document frequency (as FTS5 counts a phrase's rows for its IDF). A term counted as
   * a whole is one lexeme (the search text's words are); should one ever make several, each
   * lexeme is counted on its own. Every match is read once through the full-text index, its
   * scope computed beside it rather than planned as a second index (a prepared statement's
   * generic plan would intersect the GIN matches with the scope's whole posting list), and the
   * ranked rows are ordered as FTS5's are (to nine decimals, then by rowid: the sum's order
   * differs between the two). Materialized, so the generic plan cannot walk the table newest
   * first instead. (`materialized` in lower case: the dialect translation quotes capitalized
   * words after AS.) The bounded and the whole statement are two texts, each with a plan of its own.
   */
  private async rank(filterClause: string, values: unknown[], bounded: boolean): Promise<RankedRows> {
    const bound = bounded ? 'i.rowid > ? AND ' : '';
    const rowsOut = (await this.db
      .prepare(
        `WITH terms AS materialized (
           SELECT u.lexeme, t.hits, count(*) OVER (PARTITION BY t.position) AS parts
             FROM json_to_recordset(?::json) AS t(position int, term text, hits float8), unnest(to_tsvector('simple', t.term)) AS u
         ),
         corpus AS (
           SELECT ?::float8 + greatest(0, (SELECT coalesce(max(rowid), 0) FROM memory_items) - ?::float8) AS rows
         ),
         weights AS materialized (
           SELECT l.lexeme, greatest(1e-6, ln(greatest(1e-6, (c.rows - l.hits + 0.5) / (l.hits + 0.5)))) AS idf
             FROM (
               SELECT DISTINCT ON (lexeme) lexeme,
                      CASE WHEN parts = 1 THEN hits
                           ELSE (SELECT count(*) FROM memory_items m WHERE m.fts @@ quote_literal(lexeme)::tsquery) END AS hits
                 FROM terms ORDER BY lexeme, parts
             ) l CROSS JOIN corpus c
         ),
         anywhere AS materialized (
           SELECT i.rowid, i.fts, i.fts_length, (${filterClause}) AS visible FROM memory_items i
            WHERE ${bound}i.fts @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM weights)
         ),
         ranked AS (
           SELECT rowid, fts, fts_length FROM anywhere WHERE visible ORDER BY rowid DESC LIMIT ?
         ),
         best AS (
           SELECT label, strength FROM (
             SELECT m.rowid AS label,
                    sum(w.idf * f.tf * ${K1 + 1} / (f.tf + ${K1} * (${1 - B} + ${B} * m.fts_length / ?::float8))) AS strength
               FROM ranked m
               CROSS JOIN LATERAL (
                 SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
                   FROM unnest(ts_filter(setweight(m.fts, 'A', (SELECT array_agg(lexeme) FROM weights)), '{a}')) AS u
               ) f
               JOIN weights w ON w.lexeme = f.lexeme
              GROUP BY m.rowid
           ) scored
            ORDER BY round(strength::numeric, 9) DESC, label
            LIMIT ?
         )
         SELECT b.label, b.strength, c.read, c.visible
           FROM (SELECT count(*) AS read, count(*) FILTER (WHERE visible) AS visible FROM anywhere) c
           LEFT JOIN best b ON true
          ORDER BY round(b.strength::numeric, 9) DESC NULLS LAST, b.label`,
      )
      .all(...values)) as Array<{ label: number | null; strength: number; read: number; visible: number }>;
    // Always one row at least, for the counts: without a match its label is null.
    const first = rowsOut[0];
    return {
      rows: rowsOut.filter((row) => row.label !== null).map((row) => ({ label: row.label!, strength: row.strength })),
      read: first ? Number(first.read) : 0,
      visible: first ? Number(first.visible) : 0,
    };
  }

  /**
   * The cached statistics, taken again once they are old. Taking them reads the table, so they
   * are taken at most once per thousand times their own duration; a large store (by the
   * planner's estimate) is sampled rather than read whole, so no search waits on a full scan.
   */
  private async corpusStats(): Promise<CorpusStats> {
    const now = performance.now();
    const stats = this.stats;
    if (stats && now - stats.at < Math.max(STATS_MIN_AGE_MS, stats.tookMs * 1000)) return stats;
    const estimated = (await this.db.prepare(`SELECT reltuples AS estimate FROM pg_class WHERE oid = to_regclass('memory_items')`).get()) as
      | { estimate: number }
      | undefined;
    const estimate = estimated?.estimate ?? -1;
    let counted: { rows: number; average: number | null; top: number };
    if (estimate < EXACT_COUNT_ROWS) {
      counted = (await this.db
        .prepare('SELECT count(*) AS rows, avg(fts_length)::float8 AS average, coalesce(max(rowid), 0) AS top FROM memory_items')
        .get()) as { rows: number; average: number | null; top: number };
    } else {
      const sampled = (await this.db
        .prepare(
          `SELECT avg(fts_length)::float8 AS average, (SELECT coalesce(max(rowid), 0) FROM memory_items) AS top
             FROM memory_items TABLESAMPLE SYSTEM (?)`,
        )
        .get(Math.min(100, (100 * SAMPLE_ROWS) / estimate))) as { average: number | null; top: number };
      counted = { rows: estimate, average: sampled.average, top: sampled.top };
    }
    const done = performance.now();
    this.stats = { rows: counted.rows, averageLength: Math.max(1, counted.average ?? 1), top: counted.top, at: done, tookMs: done - now };
    return this.stats;
  }
}
