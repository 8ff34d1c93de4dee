import pg from 'pg';
import { pgFailure } from './pg-error.js';
import { PgHealthTracker, type PgHealth } from './pg-health.js';
import { pgClientConfig, type ResolvedPgSettings } from './pg-settings.js';

/** Waits between health probes while PostgreSQL is not answering (the last one repeats). */
const PROBE_DELAYS_MS = [250, 500, 1_000, 2_000, 5_000];

/**
 * How long `close` waits for connections still in use: everything that writes was closed before
 * the pool, so one still busy is stuck (a peer that stopped answering), and a shutdown must not
 * wait out its reply deadline.
 */
const CLOSE_DEADLINE_MS = 1_000;

/**
 * The pool under `PgPoolClient` and what it knows about the server's health. Connections are
 * pipelined (a transaction's BEGIN leaves with its first statement); one that failed at the
 * connection level is destroyed, socket first, so a peer that stopped answering cannot hold it.
 * While the server is not answering, a `SELECT 1` probe retries with backoff so the health comes
 * back to `up` by itself, even with no caller asking. `close` waits a second at most: past it,
 * connections still in use are dropped (the server rolls back what they had not committed).
 */
export class PgConnections {
  private readonly pool: pg.Pool;
  private readonly tracker = new PgHealthTracker();
  private probeTimer: NodeJS.Timeout | undefined;
  private probeAttempt = 0;
  private isOpen = true;

  constructor(
    private readonly settings: ResolvedPgSettings,
    private readonly probe: () => Promise<unknown>,
  ) {
    this.pool = new pg.Pool(pgClientConfig(settings, { pipeline: true }));
    // A connection that dies while idle, or between a transaction's statements, reports here;
    // without a listener it would end the process.
    this.pool.on('error', (error) => this.failed(error, { opening: false }));
    this.pool.on('connect', (client) => client.on('error', () => undefined));
  }

  get health(): PgHealth {
    return this.tracker.snapshot;
  }

  /** Returns a function that removes the listener. */
  onHealthChange(listener: (health: PgHealth) => void): () => void {
    return this.tracker.onChange(listener);
  }

  /** A pooled connection, or a classed error when none can be had within the connect deadline. */
  async checkout(): Promise<pg.PoolClient> {
    if (!this.isOpen) throw new Error('the PostgreSQL client is closed');
    try {
      return await this.pool.connect();
    } catch (error) {
      // A full pool that freed nothing in time is busy, not down.
      const full = this.pool.totalCount >= this.settings.maxConnections;
      if (!full) this.failed(error, { opening: true });
      throw pgFailure(error, { during: 'connect', deadlineMs: this.settings.connectTimeoutMs, schema: this.settings.schema });
    }
  }

  /** Back to the pool, or destroyed. */
  discard(client: pg.PoolClient, destroy: boolean): void {
    if (destroy) (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    client.release(destroy ? true : undefined);
  }

  succeeded(): void {
    this.tracker.success();
  }

  /** A connection-level failure (never a statement's own error). `opening`: no connection could be made. */
  failed(error: unknown, options: { opening: boolean }): void {
    if (!this.isOpen) return;
    this.tracker.failure(error, options);
    this.scheduleProbe();
  }

  async close(): Promise<void> {
    if (!this.isOpen) return;
    this.isOpen = false;
    if (this.probeTimer) clearTimeout(this.probeTimer);
    const ended = this.pool.end();
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), CLOSE_DEADLINE_MS)));
    const outcome = await Promise.race([ended.then(() => 'ended' as const), late]).finally(() => clearTimeout(timer));
    if (outcome === 'ended') return;
    // Their holders see the connection fail and release it; the pool then ends without us waiting.
    ended.catch(() => undefined);
    for (const client of (this.pool as unknown as { _clients: pg.PoolClient[] })._clients) {
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    }
  }

  private scheduleProbe(): void {
    if (this.probeTimer || !this.isOpen) return;
    const delay = PROBE_DELAYS_MS[Math.min(this.probeAttempt, PROBE_DELAYS_MS.length - 1)]!;
    this.probeAttempt += 1;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      if (!this.isOpen || this.tracker.snapshot.state === 'up') {
        this.probeAttempt = 0;
        return;
      }
      this.probe().then(
        () => (this.probeAttempt = 0),
        () => this.scheduleProbe(),
      );
    }, delay);
    this.probeTimer.unref();
  }
}
