import type { SqlClient } from '../storage/sql-client.js';
import { filterSql, type FullText, type FullTextFilter } from './full-text.js';
import { KIND_MEMORY_TAG, KIND_TRANSCRIPT_TAG, typeTag } from './scope.js';
import { ftsAnyOf } from './text.js';

/** SQLite: the FTS5 table `memory_fts` and its bm25(). */
export class Fts5FullText implements FullText {
  constructor(private readonly db: SqlClient) {}

  async termCounts(terms: readonly string[]): Promise<number[]> {
    const count = this.db.prepare('SELECT count(*) AS count FROM memory_fts WHERE memory_fts MATCH ?');
    const counts: number[] = [];
    for (const term of terms) counts.push(((await count.get(`fts_text : ${ftsAnyOf([term])!}`)) as { count: number }).count);
    return counts;
  }

  async candidates(
    terms: readonly string[],
    filter: FullTextFilter,
    count: number,
    scan: number,
    counts?: readonly number[],
  ): Promise<Array<{ label: number; strength: number }>> {
    const anyTerm = ftsAnyOf(terms);
    const postings = counts?.reduce((sum, count) => sum + count, 0);
    if (!anyTerm) return [];
    const contentMatch = `fts_text : (${anyTerm})`;
    // Strengths are ordered to nine decimals, then by rowid: two rows whose BM25 differs only by
    // the order its terms were summed in tie, and take the same order on both backends.
    // bm25() computes statistics for every phrase of its MATCH, so it ranks the content terms
    // alone, and the scope is applied beside it.
    const rows =
      (postings === undefined || postings <= scan) && (await this.matchingRows(contentMatch)) <= scan
        ? await this.rankAll(contentMatch, filter, count)
        : await this.rankNewest(contentMatch, filter, count, scan);
    return rows.map((row) => ({ label: row.label, strength: Math.max(0, -row.rank) }));
  }

  /** Rows matching the terms store-wide: when no more than the scan, all of them are ranked. */
  private async matchingRows(contentMatch: string): Promise<number> {
    return ((await this.db.prepare('SELECT count(*) AS count FROM memory_fts WHERE memory_fts MATCH ?').get(contentMatch)) as { count: number }).count;
  }

  /**
   * Few rows match anywhere: each is ranked and its scope read from its row (a primary-key
   * lookup), which costs less than intersecting the terms with the scope tag, whose doclist is
   * as long as the whole channel.
   */
  private async rankAll(contentMatch: string, filter: FullTextFilter, count: number): Promise<Array<{ label: number; rank: number }>> {
    const { sql: filterClause, params } = filterSql(filter);
    return (await this.db
      .prepare(
        `SELECT f.rowid AS label, bm25(memory_fts, 1.0, 0.0) AS rank FROM memory_fts f JOIN memory_items i ON i.rowid = f.rowid
         WHERE memory_fts MATCH ? AND ${filterClause}
         ORDER BY round(rank, 9), label LIMIT ?`,
      )
      .all(contentMatch, ...params, count)) as Array<{ label: number; rank: number }>;
  }

  /**
   * Many rows match: scope, kind and type are FTS tokens, so the scoped match walks its
   * doclists newest first and stops after `scan` rows in scope, and bm25() runs on those only
   * (its IDF still reads whole doclists).
   */
  private async rankNewest(contentMatch: string, filter: FullTextFilter, count: number, scan: number): Promise<Array<{ label: number; rank: number }>> {
    const filters = [`fts_tags : (${filter.visibility.ftsTags})`];
    if (filter.kind) filters.push(`fts_tags : ${filter.kind === 'memory' ? KIND_MEMORY_TAG : KIND_TRANSCRIPT_TAG}`);
    if (filter.memoryType) filters.push(`fts_tags : ${typeTag(filter.memoryType)}`);
    return (await this.db
      .prepare(
        `SELECT rowid AS label, bm25(memory_fts, 1.0, 0.0) AS rank FROM memory_fts
         WHERE memory_fts MATCH ? AND +rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT ?)
         ORDER BY round(rank, 9), label LIMIT ?`,
      )
      .all(contentMatch, `${filters.join(' AND ')} AND ${contentMatch}`, scan, count)) as Array<{ label: number; rank: number }>;
  }
}
