import pg from 'pg';
import { MagpieError } from '../../common/errors.js';
import { failureKind, PG_CONNECTION_LOST, pgFailure } from './pg-error.js';
import { pgClientConfig, resolvePgSettings, type PgConnectionSettings, type ResolvedPgSettings } from './pg-settings.js';

export type DedicatedState = 'connecting' | 'up' | 'reconnecting' | 'closed';

/** Runs one statement on the connection being set up. */
export type SetupQuery = (text: string, values?: unknown[]) => Promise<pg.QueryResult>;

/**
 * What a reconnecting `setUp` knows of this connection's earlier server processes: the one of the
 * connection that was lost, then those of attempts given up after they connected. Any of them may
 * still hold what the session held (the server has not noticed the socket closed, or the process
 * is still exiting).
 */
export interface Reconnect {
  previousPids: number[];
}

export interface DedicatedConnectionOptions {
  settings: PgConnectionSettings;
  /** Waits before each reconnect attempt; the last one repeats (default 0.1 s doubling to 5 s). */
  reconnectDelaysMs?: readonly number[];
  /** A `SELECT 1` this often notices a connection that died silently (default 5000 ms; 0: off). */
  heartbeatMs?: number;
  /**
   * Runs on every new connection before it counts as up (LISTEN again, take locks again). A
   * throw counts as a failed attempt. `reconnect` is undefined on the first connection.
   */
  setUp(client: pg.Client, query: SetupQuery, reconnect: Reconnect | undefined): Promise<void>;
}

/**
 * Waits between attempts to open a dedicated connection again. Capped at a second: the change
 * feed is how other processes' deletes and edits arrive, and once the server is back a longer
 * wait would hold them back that long; one attempt a second costs a server that is down nothing.
 */
export const DEFAULT_RECONNECT_DELAYS_MS: readonly number[] = [100, 200, 500, 1_000];

/** How long `close` lets the server acknowledge the end of the connection before dropping the socket. */
const CLOSE_DEADLINE_MS = 500;

/**
 * One PostgreSQL connection of its own, outside the pool, for what belongs to a session: advisory
 * locks, LISTEN. When it is lost (a reply deadline passed, the server ended it, the socket
 * dropped, a heartbeat got no answer) it is destroyed and opened again with backoff until it is
 * up or closed; `setUp` then restores the session's state. Statements run one at a time.
 * `close` ends the reconnect loop and any attempt in flight, and never waits on a silent peer.
 */
export class DedicatedConnection {
  readonly settings: ResolvedPgSettings;
  private client: pg.Client | undefined;
  private current: DedicatedState = 'connecting';
  private chain: Promise<unknown> = Promise.resolve();
  private heartbeat: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  /** The client of the reconnect attempt in flight, if any. */
  private attempting: pg.Client | undefined;
  private attempt = 0;
  private readonly listeners = new Set<(state: DedicatedState, error: unknown) => void>();

  constructor(private readonly options: DedicatedConnectionOptions) {
    this.settings = resolvePgSettings(options.settings);
  }

  get state(): DedicatedState {
    return this.current;
  }

  /** The server process behind the connection, while up. */
  get pid(): number | undefined {
    return (this.client as { processID?: number | null } | undefined)?.processID ?? undefined;
  }

  /** Opens the first connection; a server that cannot be reached now is an error here, not a retry loop. */
  async start(): Promise<void> {
    let client: pg.Client;
    try {
      client = await this.open(undefined);
    } catch (error) {
      this.setState('closed', error);
      throw pgFailure(error, { during: 'connect', deadlineMs: this.settings.connectTimeoutMs, schema: this.settings.schema });
    }
    this.adopt(client);
    const every = this.options.heartbeatMs ?? 5_000;
    if (every > 0) {
      this.heartbeat = setInterval(() => {
        if (this.current === 'up') this.query('SELECT 1').catch(() => undefined);
      }, every);
      this.heartbeat.unref();
    }
  }

  /** Returns a function that removes the listener. */
  onStateChange(listener: (state: DedicatedState, error: unknown) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** One statement, after the ones before it; a retryable `storage_connection` while not up. */
  query(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    const run = async () => {
      const client = this.client;
      if (this.current !== 'up' || !client) {
        throw new MagpieError(PG_CONNECTION_LOST, `the PostgreSQL session connection is ${this.current}`, { retryable: true, context: { schema: this.settings.schema } });
      }
      try {
        return await client.query(text, values);
      } catch (error) {
        if (failureKind(error) !== 'statement') this.lost(client, error);
        throw pgFailure(error, { during: 'statement', deadlineMs: this.settings.queryTimeoutMs, schema: this.settings.schema });
      }
    };
    const result = this.chain.then(run, run);
    this.chain = result.catch(() => undefined);
    return result;
  }

  /**
   * Ends the connection (the server then releases what the session held), within
   * `CLOSE_DEADLINE_MS`: past it the socket is dropped. A reconnect attempt in flight is dropped.
   */
  async close(): Promise<void> {
    if (this.current === 'closed') return;
    this.setState('closed', undefined);
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    if (this.attempting) destroy(this.attempting);
    this.attempting = undefined;
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), CLOSE_DEADLINE_MS)));
    const ended = await Promise.race([client.end().then(() => 'ended' as const, () => 'ended' as const), late]).finally(() => clearTimeout(timer));
    if (ended === 'late') destroy(client);
  }

  private async open(reconnect: Reconnect | undefined): Promise<pg.Client> {
    const client = new pg.Client(pgClientConfig(this.settings));
    // Errors before `adopt` are the attempt's own; after it they mean the connection was lost.
    client.on('error', () => undefined);
    this.attempting = client;
    try {
      await client.connect();
      await this.options.setUp(client, (text, values) => client.query(text, values), reconnect);
      return client;
    } catch (error) {
      // Given up after it connected: its server process may hold what `setUp` took back.
      const pid = (client as { processID?: number | null }).processID;
      if (reconnect && typeof pid === 'number' && !reconnect.previousPids.includes(pid)) reconnect.previousPids.push(pid);
      destroy(client);
      throw error;
    } finally {
      if (this.attempting === client) this.attempting = undefined;
    }
  }

  private adopt(client: pg.Client): void {
    this.client = client;
    this.attempt = 0;
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('Connection terminated unexpectedly')));
    this.setState('up', undefined);
  }

  private lost(client: pg.Client, error: unknown): void {
    if (this.client !== client || this.current === 'closed') return;
    const previousPid = this.pid;
    this.client = undefined;
    destroy(client);
    this.setState('reconnecting', error);
    this.scheduleReconnect({ previousPids: previousPid === undefined ? [] : [previousPid] });
  }

  private scheduleReconnect(reconnect: Reconnect): void {
    const delays = this.options.reconnectDelaysMs ?? DEFAULT_RECONNECT_DELAYS_MS;
    const delay = delays[Math.min(this.attempt, delays.length - 1)] ?? 1_000;
    this.attempt += 1;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.current === 'closed') return;
      this.open(reconnect).then(
        (client) => {
          if (this.current === 'closed') {
            destroy(client);
            return;
          }
          this.adopt(client);
        },
        (error) => {
          if (this.current === 'closed') return;
          this.setState('reconnecting', error);
          this.scheduleReconnect(reconnect);
        },
      );
    }, delay);
    this.retry.unref();
  }

  private setState(state: DedicatedState, error: unknown): void {
    const changed = state !== this.current;
    this.current = state;
    if (!changed) return;
    for (const listener of this.listeners) {
      try {
        listener(state, error);
      } catch {
        // A broken listener must not stop the reconnecting.
      }
    }
  }
}

function destroy(client: pg.Client): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  client.end().catch(() => undefined);
}
