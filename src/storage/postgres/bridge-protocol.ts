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

export interface BridgeRequest {
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

export type BridgeReply =
  | {
      ok: true;
      rows: Array<Record<string, unknown>>;
      rowCount: number;
      fields: string[];
      /** Columns of type bytea: they cross the thread boundary as plain Uint8Arrays. */
      binary?: string[];
    }
  | { ok: false; error: BridgeError };
