import { MagpieError } from '../../common/errors.js';
import { COMMIT_UNKNOWN } from '../sql-client.js';

/** A PostgreSQL error, with its SQLSTATE in `code` (`23505`: unique violation). */
export class PgError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
    readonly constraint: string | undefined,
  ) {
    super(message);
    this.name = 'PgError';
  }
}

/**
 * Codes of the failures `PgPoolClient` raises itself. The first two start with `storage_` and are
 * retryable, so `storageError` passes them through and `withStorageRetry` retries them with
 * backoff; the third is not retryable: the caller must re-read before deciding what it holds.
 */
export const PG_CONNECTION_LOST = 'storage_connection';
export const PG_TIMEOUT = 'storage_timeout';
export const PG_COMMIT_UNKNOWN = COMMIT_UNKNOWN;

/** SQLSTATEs that mean the session is gone: the server ended it, or it never started. */
const SESSION_ENDED = /^(08...|57P0[123])$/;
const SOCKET_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

/** How a failed call left its connection: still usable, or to be destroyed. */
export type FailureKind = 'statement' | 'connection' | 'timeout';

export function failureKind(error: unknown): FailureKind {
  const failure = error as { code?: unknown; message?: unknown; severity?: unknown } | undefined;
  const code = typeof failure?.code === 'string' ? failure.code : undefined;
  const message = typeof failure?.message === 'string' ? failure.message : '';
  if (code !== undefined && SESSION_ENDED.test(code)) return 'connection';
  if (code !== undefined && SOCKET_CODES.has(code)) return 'connection';
  if (/^Query read timeout$|timeout exceeded when trying to connect|Connection terminated due to connection timeout/.test(message)) return 'timeout';
  if (/Connection terminated|not queryable|Client was closed|socket hang up/i.test(message)) return 'connection';
  return 'statement';
}

/** True when the server said it ended the session before the statement completed (nothing of it committed). */
export function endedByServer(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && /^57P0[123]$/.test(code);
}

/**
 * True when the statement certainly did not run: the client refused to send it on a connection
 * already known dead, or the server ended the session before the statement completed.
 */
export function neverRan(error: unknown): boolean {
  const message = (error as { message?: unknown } | undefined)?.message;
  return endedByServer(error) || (typeof message === 'string' && /not queryable/.test(message));
}

export interface FailureContext {
  /** What was running: a statement, a COMMIT (or a write outside a transaction, which commits itself), a connection attempt. */
  during: 'statement' | 'commit' | 'connect';
  deadlineMs: number;
  schema: string;
}

/**
 * The error a caller sees: a server's own error as a `PgError` (SQLSTATE kept, so the retry rules
 * in storage-error.ts apply), a lost connection or a passed deadline as a retryable `MagpieError`,
 * and a COMMIT that got no answer as `storage_commit_unknown`.
 */
export function pgFailure(error: unknown, context: FailureContext): Error {
  const kind = failureKind(error);
  const message = error instanceof Error ? error.message : String(error);
  if (kind !== 'statement' && context.during === 'commit') {
    return new MagpieError(PG_COMMIT_UNKNOWN, `PostgreSQL did not confirm a write (${message}): it may or may not have been applied`, {
      cause: error,
      context: { schema: context.schema },
      hint: 'read back what the transaction wrote before deciding what the process holds in memory',
    });
  }
  if (kind === 'timeout') {
    return new MagpieError(PG_TIMEOUT, `PostgreSQL did not answer within ${context.deadlineMs} ms (${message})`, {
      cause: error,
      retryable: true,
      context: { schema: context.schema, during: context.during, deadline_ms: context.deadlineMs },
      hint: 'check the server and the network; the connection that did not answer was replaced, so the next statement starts afresh',
    });
  }
  if (kind === 'connection') {
    const code = (error as { code?: unknown }).code;
    return new MagpieError(PG_CONNECTION_LOST, `the PostgreSQL connection was lost (${typeof code === 'string' ? `${code}: ` : ''}${message})`, {
      cause: error,
      retryable: true,
      context: { schema: context.schema, during: context.during, ...(typeof code === 'string' ? { code } : {}) },
      hint: 'check that the server is up and reachable; Magpie opens a new connection and retries the write with backoff',
    });
  }
  if (error instanceof PgError) return error;
  const failure = error as { code?: unknown; constraint?: unknown };
  if (typeof failure?.code === 'string') {
    const converted = new PgError(message, failure.code, typeof failure.constraint === 'string' ? failure.constraint : undefined);
    converted.cause = error;
    return converted;
  }
  return error instanceof Error ? error : new Error(message);
}

/** The URL without its password, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an unparsable connection string)';
  }
}
