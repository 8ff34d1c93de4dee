import { isPostgres, type SqlDatabase } from '../storage/sql-database.js';
import { PgFullText } from './pg-full-text.js';
import { StatementCache } from './statement-cache.js';
import { KIND_MEMORY_TAG, KIND_TRANSCRIPT_TAG, typeTag, type Visibility } from './scope.js';
import { ftsAnyOf } from './text.js';
import type { MemoryKind, MemoryType } from './types.js';

/** What a full-text search may match: the caller's visibility, and optionally one kind and type. */
export interface FullTextFilter {
  visibility: Visibility;
  kind?: MemoryKind;
  memoryType?: MemoryType;
}

/**
 * The full-text side of hybrid search, per dialect. Both rank by BM25 (k1 = 1.2, b = 0.75, IDF
 * over the whole store, as FTS5's bm25() does), so that fusion thresholds mean the same on both.
 */
export interface FullText {
  /** Rows of the whole store matching each term (for choosing affordable terms), in order. */
  termCounts(terms: readonly string[]): number[];
  /** The `count` best rows matching any term within the filter; strength is BM25 (higher is better). */
  candidates(terms: readonly string[], filter: FullTextFilter, count: number): Array<{ label: number; strength: number }>;
}

export function fullTextFor(db: SqlDatabase): FullText {
  return isPostgres(db) ? new PgFullText(db) : new Fts5FullText(db);
}

/** SQLite: the FTS5 table `memory_fts` and its bm25(). */
class Fts5FullText implements FullText {
  private readonly statements: StatementCache;

  constructor(db: SqlDatabase) {
    this.statements = new StatementCache(db, 16);
  }

  termCounts(terms: readonly string[]): number[] {
    const count = this.statements.get('SELECT count(*) AS count FROM memory_fts WHERE memory_fts MATCH ?');
    return terms.map((term) => (count.get(`fts_text : ${ftsAnyOf([term])!}`) as { count: number }).count);
  }

  candidates(terms: readonly string[], filter: FullTextFilter, count: number): Array<{ label: number; strength: number }> {
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
    // the scoped match (cheap without bm25) restricts the rows before the top is taken.
    const rows = this.statements
      .get(
        `SELECT rowid AS label, bm25(memory_fts, 1.0, 0.0) AS rank FROM memory_fts
         WHERE memory_fts MATCH ? AND +rowid IN (SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?)
         ORDER BY rank LIMIT ?`,
      )
      .all(contentMatch, `${filters.join(' AND ')} AND ${contentMatch}`, count) as Array<{ label: number; rank: number }>;
    return rows.map((row) => ({ label: row.label, strength: Math.max(0, -row.rank) }));
  }
}
