/** Messages between `PgDatabase` (the caller's thread) and its connection thread. */

export interface BridgeSettings {
  /** A libpq connection string (`postgres://user@host:port/db`). */
  url: string;
  /** Schema the connection works in (`search_path`); created if missing. */
  schema: string;
  /** Shown in `pg_stat_activity`. */
  applicationName: string;
  /** Server-side limit on one statement, in milliseconds. */
  statementTimeoutMs: number;
}

/** The shared flag's value once the connection thread has ended (request ids are positive). */
export const THREAD_ENDED = -1;

export interface BridgeRequest {
  /** Positive, one more than the previous request's (wrapping); the reply carries it back. */
  id: number;
  /** Run before `sql`, without results (a transaction's BEGIN or SAVEPOINT, sent with its first statement). */
  prefix: string[];
  /** One statement with `$n` parameters, or several statements without parameters (`simple`). */
  sql: string;
  params: unknown[];
  /** A name under which the server keeps the parsed statement for this connection. */
  name?: string;
  /** Several `;`-separated statements, no parameters (DDL, transaction control). */
  simple?: boolean;
  close?: boolean;
}

export interface BridgeError {
  message: string;
  code?: string;
  constraint?: string;
  detail?: string;
  table?: string;
}

export type BridgeReply = { id: number } & (
  | {
      ok: true;
      rows: Array<Record<string, unknown>>;
      rowCount: number;
      fields: string[];
      /** Columns of type bytea: they cross the thread boundary as plain Uint8Arrays. */
      binary?: string[];
    }
  | { ok: false; error: BridgeError }
);
