import type BetterSqlite3 from 'better-sqlite3';
import type { SqlDialect, SqlRunResult } from './sql-client.js';

export type { SqlDialect, SqlRunResult } from './sql-client.js';
export { isPostgres } from './sql-client.js';

/**
 * One synchronous connection, as `SerialClient` drives it: better-sqlite3 (local and bounded, so
 * it may run on the event loop). Stores never see it; they use `SqlClient`.
 */
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
