import type { Visibility } from './scope.js';
import type { MemoryKind, MemoryType } from './types.js';

/** What a full-text search may match: the caller's visibility, and optionally one kind and type. */
export interface FullTextFilter {
  visibility: Visibility;
  kind?: MemoryKind;
  memoryType?: MemoryType;
}

/** The filter as SQL over `memory_items i`: every clause joined by AND, and its parameters in order. */
export function filterSql(filter: FullTextFilter): { sql: string; params: unknown[] } {
  const clauses = [filter.visibility.sql];
  const params: unknown[] = [...filter.visibility.params];
  if (filter.kind) {
    clauses.push('i.kind = ?');
    params.push(filter.kind);
  }
  if (filter.memoryType) {
    clauses.push('i.memory_type = ?');
    params.push(filter.memoryType);
  }
  return { sql: clauses.join(' AND '), params };
}

/**
 * The full-text side of hybrid search, one per dialect (`fts5-full-text.ts`, `pg-full-text.ts`,
 * chosen by the memory dialect). Both rank by BM25 (k1 = 1.2, b = 0.75, IDF over the whole
 * store, as FTS5's bm25() does), so that fusion thresholds mean the same on both.
 */
export interface FullText {
  /** Rows of the whole store matching each term (for choosing affordable terms), in order. */
  termCounts(terms: readonly string[]): Promise<number[]>;
  /**
   * The `count` best rows matching any term within the filter; strength is BM25 (higher is
   * better). Only the `scan` newest such rows (by rowid) are ranked, so a query on a word said
   * in many thousand messages costs what a rarer one does; IDF still counts the whole store.
   * `counts`, each term's store-wide row count as `termCounts` gave it (in the terms' order),
   * never changes which rows are ranked. SQLite takes their sum as a hint of the cost; PostgreSQL
   * takes them as the terms' document frequencies instead of counting every match again, so a
   * count the caller kept for a while (the search keeps them 30 s) shows in the strengths there.
   */
  candidates(
    terms: readonly string[],
    filter: FullTextFilter,
    count: number,
    scan: number,
    counts?: readonly number[],
  ): Promise<Array<{ label: number; strength: number }>>;
}
