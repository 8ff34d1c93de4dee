import pg from 'pg';
import { MagpieError } from '../../common/errors.js';
import { PG_CONNECTION_LOST } from './pg-error.js';
import { DedicatedConnection, type DedicatedConnectionOptions, type DedicatedState, type Reconnect, type SetupQuery } from './pg-dedicated-connection.js';

export type PgSessionOptions = Omit<DedicatedConnectionOptions, 'setUp'>;

/**
 * Waits before each attempt to reconnect the lock session (the last one repeats): writes wait for
 * it, so it is tried again soon and often. One connection attempt a second while the server is
 * away costs it nothing; a long backoff would cost every write waiting meanwhile.
 */
const LOCK_SESSION_RECONNECT_DELAYS_MS: readonly number[] = [25, 100, 250, 500, 1_000];

/** The advisory lock id of `key` in the session's schema (the writer lock is `writer:<key>`, a compaction lock `compaction:<channel id>`, as pg-writer-lock.ts and pg-channel-locks.ts name them). */
const LOCK_ID = `hashtextextended(current_schema() || ':' || k, 0)`;

/**
 * Session-scoped advisory locks on one connection of their own (`DedicatedConnection`): the
 * writer lock per shard key and the per-channel compaction locks. The server drops them when the
 * connection ends, however the process ended, so they cannot go stale.
 *
 * After a lost connection the session reconnects with a short backoff (capped at a second,
 * `LOCK_SESSION_RECONNECT_DELAYS_MS`) and takes every lock it held back in one statement. A lock
 * still held by one of its own earlier server processes (the server has not noticed the lost
 * connection is gone, or that process is still exiting) is reclaimed by ending that process; if
 * it does not exit in time, the attempt fails and the next one tries again. A lock another
 * session took meanwhile is lost: `onLost(key)` listeners hear of it, and a process that lost its
 * writer lock must stop writing and say so. While reconnecting the process holds no lock at all:
 * callers that must not write unlocked watch `onStateChange`.
 */
export class PgSession {
  private readonly connection: DedicatedConnection;
  private readonly held = new Set<string>();
  private readonly asking = new Map<string, Promise<boolean>>();
  private readonly lostListeners = new Set<(key: string) => void>();

  private constructor(options: PgSessionOptions) {
    this.connection = new DedicatedConnection({
      reconnectDelaysMs: LOCK_SESSION_RECONNECT_DELAYS_MS,
      ...options,
      setUp: (client, query, reconnect) => this.setUp(client, query, reconnect),
    });
  }

  /** The schema whose locks these are. */
  get schema(): string {
    return this.connection.settings.schema;
  }

  static async open(options: PgSessionOptions): Promise<PgSession> {
    const session = new PgSession(options);
    await session.connection.start();
    return session;
  }

  get state(): DedicatedState {
    return this.connection.state;
  }

  /** The keys whose locks this session holds (or will take back on reconnecting). */
  get keys(): string[] {
    return [...this.held];
  }

  /** True when the lock is this session's now (also when it already was: session locks would stack). */
  tryLock(key: string): Promise<boolean> {
    if (this.held.has(key)) return Promise.resolve(true);
    // Two callers asking at once share one attempt: a second lock would need a second unlock.
    let attempt = this.asking.get(key);
    if (!attempt) {
      attempt = this.connection
        .query(`SELECT pg_try_advisory_lock(${LOCK_ID}) AS locked FROM (SELECT $1::text AS k) AS key`, [key])
        .then((result) => {
          const locked = (result.rows[0] as { locked: boolean | null }).locked;
          // No current schema (it does not exist yet) makes the lock id NULL.
          if (locked === null) throw new MagpieError('postgres_schema_missing', `schema ${this.connection.settings.schema} does not exist, so its locks cannot be taken`, { hint: 'open the store (which migrates the schema) before taking its locks' });
          if (locked) this.held.add(key);
          return locked;
        })
        .finally(() => this.asking.delete(key));
      this.asking.set(key, attempt);
    }
    return attempt;
  }

  async unlock(key: string): Promise<void> {
    if (!this.held.delete(key)) return;
    try {
      await this.connection.query(`SELECT pg_advisory_unlock(${LOCK_ID}) FROM (SELECT $1::text AS k) AS key`, [key]);
    } catch {
      // Not connected: the server dropped the lock with the connection, and it is not taken back.
    }
  }

  /** Returns a function that removes the listener. */
  onLost(listener: (key: string) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /** Returns a function that removes the listener. */
  onStateChange(listener: (state: DedicatedState, error: unknown) => void): () => void {
    return this.connection.onStateChange(listener);
  }

  async close(): Promise<void> {
    this.held.clear();
    await this.connection.close();
  }

  private async setUp(_client: pg.Client, query: SetupQuery, reconnect: Reconnect | undefined): Promise<void> {
    if (!reconnect || this.held.size === 0) return;
    let missing = await this.retake(query, [...this.held]);
    if (missing.length > 0 && reconnect.previousPids.length > 0) {
      // An earlier process of this session may still hold them: end it (only if it does), wait
      // for it to exit, and try again whatever the answer (it may have exited meanwhile).
      await query(
        `SELECT pg_terminate_backend(holder.pid, 2000) AS ended FROM (
           SELECT DISTINCT l.pid FROM pg_locks l
            WHERE l.locktype = 'advisory' AND l.pid = ANY($1::int[]) AND l.objsubid = 1
              AND ((l.classid::bigint << 32) | l.objid::bigint) IN (SELECT ${LOCK_ID} FROM unnest($2::text[]) AS k)) AS holder`,
        [reconnect.previousPids, missing],
      );
      missing = await this.retake(query, missing);
      if (missing.length > 0 && (await this.heldBy(query, reconnect.previousPids, missing))) {
        // Not another session's: this session's own process has not exited yet. Not lost.
        throw new MagpieError(PG_CONNECTION_LOST, 'an earlier server process of the lock session still holds its locks', {
          retryable: true,
          context: { schema: this.connection.settings.schema, pids: reconnect.previousPids },
        });
      }
    }
    for (const key of missing) {
      this.held.delete(key);
      for (const listener of this.lostListeners) {
        try {
          listener(key);
        } catch {
          // One listener's failure must not hide the loss from the others.
        }
      }
    }
  }

  /** Whether one of `pids` holds one of the locks of `keys`. */
  private async heldBy(query: SetupQuery, pids: number[], keys: string[]): Promise<boolean> {
    const result = await query(
      `SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.granted AND l.pid = ANY($1::int[]) AND l.objsubid = 1
          AND ((l.classid::bigint << 32) | l.objid::bigint) IN (SELECT ${LOCK_ID} FROM unnest($2::text[]) AS k)
        LIMIT 1`,
      [pids, keys],
    );
    return result.rows.length > 0;
  }

  /** Takes `keys` again in one statement; returns those another session holds. */
  private async retake(query: SetupQuery, keys: string[]): Promise<string[]> {
    const result = await query(`SELECT k AS key, pg_try_advisory_lock(${LOCK_ID}) AS locked FROM unnest($1::text[]) AS k`, [keys]);
    return (result.rows as Array<{ key: string; locked: boolean }>).filter((row) => !row.locked).map((row) => row.key);
  }
}
