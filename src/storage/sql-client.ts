/**
 * The asynchronous database seam every store is written against. It keeps the statement shape
 * of better-sqlite3 (prepare / run / get / all / pluck) so a store reads the same on both
 * backends, but every call returns a promise: a statement that crosses a network never holds
 * the event loop. SQLite answers inside the call (`SerialClient`, synchronous underneath, which
 * is what makes it fast); PostgreSQL answers when the server does (`PgPoolClient`, on `pg.Pool`).
 *
 * Transactions bind to the async context that opened them: a statement prepared anywhere on the
 * client and run from inside `transaction(fn)` (in `fn` or anything it awaits) goes to the
 * transaction's connection; a statement run from elsewhere meanwhile does not see it (SQLite:
 * it waits until the transaction ends; PostgreSQL: it runs on another pooled connection).
 * So a transaction must never await work that itself waits for the client from outside it.
 */
export type SqlDialect = 'sqlite' | 'postgres';

export interface SqlRunResult {
  changes: number;
  lastInsertRowid: number | bigint;
}

export interface SqlQuery {
  run(...params: unknown[]): Promise<SqlRunResult>;
  /** The first row, or undefined (with `pluck`: its first column). */
  get(...params: unknown[]): Promise<unknown>;
  all(...params: unknown[]): Promise<unknown[]>;
  /**
   * Runs the statement once for each parameter list, in order, and gives each run's result. On
   * SQLite the runs are one synchronous step (no promise or turn of the event loop per row); on
   * PostgreSQL they leave together, pipelined. A run that throws stops the rest.
   */
  runEach(paramLists: ReadonlyArray<readonly unknown[]>): Promise<SqlRunResult[]>;
  /** Rows in batches, so a scan of a large table never holds it all in memory. */
  iterate(...params: unknown[]): AsyncIterableIterator<unknown>;
  /** A copy of this query that returns the first column only. */
  pluck(toggle?: boolean): SqlQuery;
}

/** One statement of a script run whole by SQLite's writer thread (`SqlClient.scriptOffThread`). */
export interface ScriptStep {
  sql: string;
  /** One run per parameter list, in order. */
  paramLists: unknown[][];
  /** Every run must change a row: one that changes none rolls the script back (`script_conflict`). */
  mustChange?: boolean;
  /**
   * Run i happens only when run i of the step before changed a row, with that run's new rowid as
   * its first parameter (a row that points at the row just inserted).
   */
  afterRowidsOfPrevious?: boolean;
}

/**
 * `immediate` and `exclusive` take the write lock up front on SQLite (BEGIN IMMEDIATE); on
 * PostgreSQL a transaction that must be serial says how (row locks, advisory locks) in its own
 * statements, at the place that needs it.
 */
export type TransactionMode = 'deferred' | 'immediate' | 'exclusive';

export interface TransactionOptions {
  /**
   * PostgreSQL: each statement in the transaction (and each wait for a lock) may take up to this
   * long instead of the pool's statement deadline. For schema steps at start-up, which may
   * rewrite or index a whole table. SQLite has no statement deadline and ignores it.
   */
  deadlineMs?: number;
}

export interface SqlClient {
  readonly dialect: SqlDialect;
  readonly open: boolean;
  /** True when the caller's async context is inside one of this client's transactions. */
  readonly inTransaction: boolean;
  /**
   * Transactions that can run at once, none waiting for a connection: 1 on SQLite's one
   * connection; on PostgreSQL the pool less the lanes that keep connections of their own.
   */
  readonly transactionSlots: number;
  prepare(sql: string): SqlQuery;
  /** Runs one script (several statements, no parameters). */
  exec(sql: string): Promise<void>;
  /**
   * Runs `fn` in one transaction and resolves with its result once committed; a throw rolls it
   * back and rejects with the same error. Nested calls become savepoints.
   */
  transaction<T>(fn: () => Promise<T> | T, mode?: TransactionMode, options?: TransactionOptions): Promise<T>;
  /**
   * SQLite with a writer thread only: the steps `build` makes (called only when the thread
   * takes them) as one transaction on that thread (see `SerialClient`), resolving true once
   * committed; false when it cannot (the caller then writes in `transaction`). For big,
   * self-contained writes: a burst's group commit.
   */
  scriptOffThread?(build: () => ScriptStep[]): Promise<boolean>;
  /**
   * Runs `callback` once the outermost transaction open in the caller's context has committed,
   * or now when none is open; never after a rollback of that transaction. For wake-ups (work
   * that reads what the transaction wrote, from outside it), not for facts: a callback added
   * inside a savepoint that rolled back still runs when the outer transaction commits.
   */
  afterCommit(callback: () => void): void;
  /** SQLite only: a PRAGMA, as better-sqlite3 runs it. */
  pragma(source: string, options?: { simple?: boolean }): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * The code of a COMMIT whose answer never came (a dropped PostgreSQL connection, a writer thread
 * that went away): it may have committed, so the caller reads back before deciding.
 */
export const COMMIT_UNKNOWN = 'storage_commit_unknown';

/**
 * The code of a write held back before it was sent because this process could not confirm that
 * it still holds its writer lock (PostgreSQL's lock session was reconnecting past the write's
 * deadline, or the store is closing). No write of the caller's was at fault and none reached the
 * database: retrying the same writes one at a time cannot tell a bad one apart.
 */
export const WRITES_HELD = 'storage_writes_held';

/** Whether the client (or connection) speaks PostgreSQL. */
export function isPostgres(db: { readonly dialect?: SqlDialect }): boolean {
  return db.dialect === 'postgres';
}

/** The callbacks a committed transaction collected, each on its own: one that throws stops none of the others. */
export function runCommitted(callbacks: Array<() => void> | undefined): void {
  for (const callback of callbacks ?? []) {
    try {
      callback();
    } catch {
      // A wake-up that failed leaves the committed transaction committed.
    }
  }
}
