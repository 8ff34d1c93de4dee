import type { SqlClient } from '../storage/sql-client.js';
import type { FullText } from './full-text.js';
import type { ItemRowValues } from './item-writes.js';

/** A row of the vector backlog as a batch reads it. */
export interface BacklogRow {
  rowid: number;
  index_key: string;
  content: string;
  content_hash: string;
}

/**
 * The statements of the memory store that differ between SQLite and PostgreSQL. The store's
 * logic is written once against `SqlClient`; what one backend says otherwise (full text, JSON,
 * LATERAL joins, arrays that carry a whole batch in one round trip) comes from here. Picked
 * once per client (`memoryDialectFor` in `pick-dialect.ts`), when a store is built.
 */
export interface MemoryDialect {
  readonly name: 'sqlite' | 'postgres';
  /** The full-text side of search. */
  fullText(db: SqlClient): FullText;
  /**
   * SQL true for a `memory_items` row whose `source_ids` (a JSON array of strings) shares an id
   * with the JSON array bound to its one parameter.
   */
  readonly sharesSourceId: string;
  /**
   * Up to `radius` transcript rows before and after each anchor (a rowid in `list`), in one
   * statement: rows are the item columns plus `anchor`. `earlier`/`later` are the conditions (and
   * order and limit) of each side over `b`, relative to the anchor `a`.
   */
  neighbourhoods(query: { columns: string; neighbourColumns: string; earlier: string; later: string; list: readonly number[]; radius: number }): {
    sql: string;
    params: unknown[];
  };
  /** Archived messages and their backlog rows, inside the caller's open transaction. */
  stageTranscripts(db: SqlClient, rows: readonly ItemRowValues[], now: number): Promise<void>;
  /**
   * Writes a batch of backlog vectors inside one transaction, leaving alone a row deleted or
   * edited since it was read; returns how many were written and under which index keys.
   */
  writeBacklogVectors(db: SqlClient, rows: readonly BacklogRow[], vectors: readonly Float32Array[]): Promise<{ written: number; keys: Set<string> }>;
  /**
   * Inside the caller's transaction, before vectors made from items' texts are written: the
   * rowids of those items whose text still has the hash the vector was made from, held so until
   * the transaction ends. An item an edit or a deletion is changing at that moment is left out,
   * not waited for: the change owes its vector anew (or needs none) and wakes the backlog itself.
   * PostgreSQL holds the rows (`FOR SHARE SKIP LOCKED`): without it, an edit committed between a
   * check and the write would leave the old text's vector in place, owed no more. SQLite needs
   * no hold: the transaction is the only writer.
   */
  unchangedItems(db: SqlClient, items: ReadonlyArray<{ rowid: number; contentHash: string }>): Promise<Set<number>>;
  /**
   * Makes saves into one scope serial, inside the caller's transaction, before its duplicate
   * checks. SQLite: nothing to do, the transaction holds the one connection until it commits.
   * PostgreSQL: a transaction-level advisory lock on the scope's index key, since several
   * processes may save into one scope at once and READ COMMITTED would let both miss the other.
   */
  serializeSaves(db: SqlClient, indexKey: string): Promise<void>;
  /** Sets `fts_text` of a batch of rows (a schema step filling the column). */
  writeSearchTexts(db: SqlClient, rowids: readonly number[], texts: readonly string[]): Promise<void>;
}

/** The rowids of `items` whose row (as read) still has the item's hash. */
export function sameHashes(
  items: ReadonlyArray<{ rowid: number; contentHash: string }>,
  rows: ReadonlyArray<{ rowid: number | string; content_hash: string }>,
): Set<number> {
  const hashes = new Map(rows.map((row) => [Number(row.rowid), row.content_hash]));
  return new Set(items.filter((item) => hashes.get(item.rowid) === item.contentHash).map((item) => item.rowid));
}
