/**
 * What a store is and what opening one gives (shared by `open-storage.ts` and PostgreSQL's
 * `postgres/open-postgres.ts`, which is loaded only for a PostgreSQL store).
 */
import type { SqlClient } from './sql-client.js';
import type { ChannelLocks } from './channel-locks.js';
import { redactUrl } from './postgres/pg-error.js';
import type { PgHealth } from './postgres/pg-health.js';
import type { HeldWriterLock } from './postgres/pg-session-locks.js';

/** Where a process keeps its data: the data dir alone (SQLite), or PostgreSQL plus the data dir for index files. */
export type StorageTarget =
  | { backend: 'sqlite'; dataDir: string }
  | { backend: 'postgres'; dataDir: string; url: string; schema: string; limits?: PostgresLimits };

/** `[storage]`'s deadlines and pool size (defaults in pg-settings.ts when absent). */
export interface PostgresLimits {
  statementTimeoutMs: number;
  connectTimeoutMs: number;
  poolSize: number;
}

/** The connection to a shared store, as an operator sees it (`/healthz`, `/readyz`). */
export interface StorageConnection {
  /** The pool: `up`, `reconnecting` or `down`, with the newest failure. */
  health(): PgHealth;
  /** The lock session: whether this process holds its writer lock now. */
  locksHeld(): boolean;
  /** Hears when the pool's state changes; returns a function that removes the listener. */
  onHealthChange(listener: (health: PgHealth) => void): () => void;
  /**
   * Hears when the lock session's connection is lost (`reconnecting`, with why) and when it is
   * back with its locks taken again (`up`); returns a function that removes the listener.
   */
  onLockSessionChange(listener: (state: 'up' | 'reconnecting', error: string | undefined) => void): () => void;
  /**
   * Shutdown has begun and the locks are about to be released: from now on a write that finds
   * the lock session away fails at once (`storage_writes_held`) instead of waiting for it, and a
   * session that is away stops reconnecting. Writes go on as before while the session is up.
   */
  beginClose(): void;
}

/** An open store and what closes it (the database, then the writer lock). */
export interface OpenedStorage {
  target: StorageTarget;
  dataDir: string;
  db: SqlClient;
  /** On a shared store, which process compacts a channel; none on SQLite (one writer per file). */
  channelLocks?: ChannelLocks;
  /** On a shared store, the connection's state; none on SQLite. */
  connection?: StorageConnection;
  /** PostgreSQL: takes the writer lock of another key too (migrate holds every shard's). */
  lockWriterKey?(key: string): Promise<HeldWriterLock>;
  /**
   * PostgreSQL: hears when the writer lock was lost for good (after a reconnect another process
   * held it). From then on this process must not write: the store refuses writes already.
   */
  onWriterLost?(listener: (key: string) => void): () => void;
  close(): Promise<void>;
}

/** Where the data is, for messages and logs (no password). */
export function describeTarget(target: StorageTarget): string {
  return target.backend === 'sqlite' ? target.dataDir : `${redactUrl(target.url)} (schema ${target.schema})`;
}
