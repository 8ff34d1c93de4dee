import type { SqlClient } from '../storage/sql-client.js';
import type { FullText, FullTextFilter } from './full-text.js';
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
  ): Promise<Array<{ label: number; strength: number }>> {
    const anyTerm = ftsAnyOf(terms);
    if (!anyTerm) return [];
    // Scope, kind and type are FTS tokens, so the whole filter runs inside the full-text match:
    // no join per matching row, and nothing outside the scope competes for the top candidates.
    const filters = [`fts_tags : (${filter.visibility.ftsTags})`];
    if (filter.kind) filters.push(`fts_tags : ${filter.kind === 'memory' ? KIND_MEMORY_TAG : KIND_TRANSCRIPT_TAG}`);
    if (filter.memoryType) filters.push(`fts_tags : ${typeTag(filter.memoryType)}`);
    const contentMatch = `fts_text : (${anyTerm})`;
    // bm25() computes statistics for every phrase of its MATCH, the scope tag included, and a
    // tag's doclist is as long as the whole channel. So bm25 ranks the content terms alone and
    // the scoped match (cheap without bm25) restricts the rows before the top is taken. The
    // scoped match walks its doclists newest first and stops after `scan` rows, so bm25() runs
    // on at most that many rows (its IDF still reads whole doclists, as before).
    const rows = (await this.db
      .prepare(
        `SELECT rowid AS label, bm25(memory_fts, 1.0, 0.0) AS rank FROM memory_fts
         WHERE memory_fts MATCH ? AND +rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rowid DESC LIMIT ?)
         ORDER BY rank, label LIMIT ?`,
      )
      .all(contentMatch, `${filters.join(' AND ')} AND ${contentMatch}`, scan, count)) as Array<{ label: number; rank: number }>;
    return rows.map((row) => ({ label: row.label, strength: Math.max(0, -row.rank) }));
  }
}
