import type BetterSqlite3 from 'better-sqlite3';

/**
 * The database seam every store is written against: the synchronous statement API of
 * better-sqlite3 (prepare / run / get / all, transactions as wrapped functions). SQLite is
 * better-sqlite3 itself; PostgreSQL is `PgDatabase` (`postgres/pg-database.ts`), which runs the
 * same statements on one dedicated connection. Stores stay synchronous on purpose: a change in
 * the database and the in-memory change it mirrors happen with no await in between.
 */
export type SqlDialect = 'sqlite' | 'postgres';

export interface SqlRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqlStatement {
  run(...params: unknown[]): SqlRunResult;
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  iterate(...params: unknown[]): IterableIterator<unknown>;
  /** Makes `get` return the first column only (and `all` a list of them). */
  pluck(toggle?: boolean): SqlStatement;
}

/** A function wrapped so that its body runs in one transaction (nested: a savepoint). */
export type SqlTransaction<F extends (...args: any[]) => unknown> = BetterSqlite3.Transaction<F>;

export interface SqlDatabase {
  prepare(sql: string): SqlStatement;
  exec(sql: string): unknown;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  transaction<F extends (...args: any[]) => any>(fn: F): SqlTransaction<F>;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  close(): unknown;
  readonly open: boolean;
  readonly inTransaction: boolean;
  /** Set on PostgreSQL connections; absent (SQLite) otherwise. */
  readonly dialect?: SqlDialect;
}

export function isPostgres(db: SqlDatabase): boolean {
  return db.dialect === 'postgres';
}
