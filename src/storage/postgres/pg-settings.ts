import pg from 'pg';
import { InputError } from '../../common/errors.js';
import { isSchemaName, SCHEMA_NAME_RULE } from '../../common/schema-name.js';

/**
 * How Magpie connects to PostgreSQL and how long it waits. Every deadline is well under ten
 * seconds by default, so a server that stops answering costs a caller a few seconds and a retry,
 * never the event loop. The session settings travel in the startup packet: a new connection
 * costs no extra round trip for them.
 */
export interface PgConnectionSettings {
  /** A libpq connection string (`postgres://user@host:port/db`). */
  url: string;
  /** The schema every statement works in (`search_path`); created by `PgPoolClient.connect`. */
  schema: string;
  /** Shown in `pg_stat_activity` (default `magpie`). */
  applicationName?: string;
  /** Server-side limit on one statement, `statement_timeout` (default 5000 ms). */
  statementTimeoutMs?: number;
  /** Server-side limit on waiting for a lock, `lock_timeout` (default 2000 ms). */
  lockTimeoutMs?: number;
  /**
   * Client-side limit on one reply (default: the statement deadline plus 1000 ms): it fires when
   * the server or the network stops answering, and the connection is destroyed.
   */
  queryTimeoutMs?: number;
  /** Limit on opening a connection, or on waiting for a free one in the pool (default 3000 ms). */
  connectTimeoutMs?: number;
  /** `idle_in_transaction_session_timeout` (default 0: off; a transaction may await other work). */
  idleInTransactionTimeoutMs?: number;
  /** Idle time before TCP keepalive probes start, on both ends of the connection (default 10000 ms). */
  keepAliveInitialDelayMs?: number;
  /** Pool size (default 10, at least 2: the statements outside transactions hold one). */
  maxConnections?: number;
  /** An idle pooled connection is closed after this long (default 30000 ms). */
  idleTimeoutMs?: number;
  /** Rows per FETCH when `iterate` streams a result (default 500). */
  iterateBatch?: number;
  /** Every session refuses writes on the server (`default_transaction_read_only`): a reader's pool. */
  readOnly?: boolean;
}

export type ResolvedPgSettings = Readonly<Required<PgConnectionSettings>>;

export const PG_DEFAULTS = Object.freeze({
  applicationName: 'magpie',
  statementTimeoutMs: 5_000,
  lockTimeoutMs: 2_000,
  connectTimeoutMs: 3_000,
  idleInTransactionTimeoutMs: 0,
  keepAliveInitialDelayMs: 10_000,
  maxConnections: 10,
  idleTimeoutMs: 30_000,
  iterateBatch: 500,
  readOnly: false,
});

/** Margin of the client's reply deadline over the server's statement deadline. */
const QUERY_TIMEOUT_MARGIN_MS = 1_000;

/** Fills in the defaults and refuses values that cannot work, naming the setting. */
export function resolvePgSettings(settings: PgConnectionSettings): ResolvedPgSettings {
  if (typeof settings.url !== 'string' || settings.url.length === 0) throw new InputError('PostgreSQL settings: url is empty');
  if (!isSchemaName(settings.schema)) {
    throw new InputError(`PostgreSQL settings: schema "${settings.schema}" is not a plain identifier`, {
      hint: `use ${SCHEMA_NAME_RULE}`,
    });
  }
  const merged = { ...PG_DEFAULTS, ...withoutUndefined(settings) };
  const resolved: Required<PgConnectionSettings> = {
    ...merged,
    url: settings.url,
    schema: settings.schema,
    queryTimeoutMs: settings.queryTimeoutMs ?? merged.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
  };
  const positive: Array<keyof PgConnectionSettings> = ['statementTimeoutMs', 'lockTimeoutMs', 'queryTimeoutMs', 'connectTimeoutMs', 'keepAliveInitialDelayMs', 'maxConnections', 'idleTimeoutMs', 'iterateBatch'];
  for (const key of positive) {
    const value = resolved[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0) {
      throw new InputError(`PostgreSQL settings: ${key} must be a positive integer, got ${String(value)}`);
    }
  }
  if (resolved.maxConnections < 2) {
    throw new InputError(`PostgreSQL settings: maxConnections must be at least 2 (one is held by the statements outside transactions), got ${resolved.maxConnections}`);
  }
  if (!Number.isInteger(resolved.idleInTransactionTimeoutMs) || resolved.idleInTransactionTimeoutMs < 0) {
    throw new InputError(`PostgreSQL settings: idleInTransactionTimeoutMs must be 0 (off) or a positive integer, got ${resolved.idleInTransactionTimeoutMs}`);
  }
  return Object.freeze(resolved);
}

/** Integers come back as numbers, as SQLite returns them (timestamps in ms fit in 2^53); bytea as Buffer. */
const TYPES = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

/**
 * The server's side of TCP keepalive, sent with every connection: a session whose process died
 * with its host, or was cut off by the network, is ended by the server within about
 * idle + 3 × interval (25 s by default) instead of the operating system's two hours. Until then
 * it keeps its advisory locks (the writer lock: no replacement bot could start) and whatever a
 * transaction of it held. Ignored over a Unix socket.
 */
function serverKeepalives(settings: ResolvedPgSettings): string {
  const idle = Math.max(1, Math.ceil(settings.keepAliveInitialDelayMs / 1000));
  const interval = Math.max(1, Math.ceil(idle / 2));
  return `-c tcp_keepalives_idle=${idle} -c tcp_keepalives_interval=${interval} -c tcp_keepalives_count=${SERVER_KEEPALIVE_PROBES}`;
}

/** Unanswered probes before the server gives a session up. */
const SERVER_KEEPALIVE_PROBES = 3;

/** The `pg` client options for these settings (pool options included: `pg.Pool` passes them on). */
export function pgClientConfig(settings: ResolvedPgSettings, options: { pipeline?: boolean } = {}): pg.PoolConfig {
  return {
    connectionString: settings.url,
    application_name: settings.applicationName.slice(0, 63),
    statement_timeout: settings.statementTimeoutMs,
    lock_timeout: settings.lockTimeoutMs,
    query_timeout: settings.queryTimeoutMs,
    connectionTimeoutMillis: settings.connectTimeoutMs,
    ...(settings.idleInTransactionTimeoutMs > 0 ? { idle_in_transaction_session_timeout: settings.idleInTransactionTimeoutMs } : {}),
    // The schema is a plain identifier (checked above); quoted so its case is kept. No JIT: every
    // statement here is short, and compiling one the planner overestimates (a search's
    // conditional subquery) took 390 ms for a statement that runs in 13.
    options: `-c search_path="${settings.schema}" -c jit=off ${serverKeepalives(settings)}${settings.readOnly ? ' -c default_transaction_read_only=on' : ''}`,
    keepAlive: true,
    keepAliveInitialDelayMillis: settings.keepAliveInitialDelayMs,
    max: settings.maxConnections,
    idleTimeoutMillis: settings.idleTimeoutMs,
    types: TYPES,
    ...(options.pipeline ? { pipeline: true } : {}),
  };
}

function withoutUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;
}
