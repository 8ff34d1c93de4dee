import pg from 'pg';
import { MagpieError } from '../../common/errors.js';
import { failureKind, PG_CONNECTION_LOST, pgFailure } from './pg-error.js';
import { pgClientConfig, resolvePgSettings, type PgConnectionSettings, type ResolvedPgSettings } from './pg-settings.js';

export type DedicatedState = 'connecting' | 'up' | 'reconnecting' | 'closed';

/** Runs one statement on the connection being set up. */
export type SetupQuery = (text: string, values?: unknown[]) => Promise<pg.QueryResult>;

export interface DedicatedConnectionOptions {
  settings: PgConnectionSettings;
  /** Waits before each reconnect attempt; the last one repeats (default 0.1 s doubling to 5 s). */
  reconnectDelaysMs?: readonly number[];
  /** A `SELECT 1` this often notices a connection that died silently (default 5000 ms; 0: off). */
  heartbeatMs?: number;
  /**
   * Runs on every new connection before it counts as up (LISTEN again, take locks again). A
   * throw counts as a failed attempt. `previousPid` is the server process of the connection
   * that was lost, if any.
   */
  setUp(client: pg.Client, query: SetupQuery, reconnect: { previousPid: number | undefined } | undefined): Promise<void>;
}

export const DEFAULT_RECONNECT_DELAYS_MS: readonly number[] = [100, 200, 500, 1_000, 2_000, 5_000];

/**
 * One PostgreSQL connection of its own, outside the pool, for what belongs to a session: advisory
 * locks, LISTEN. When it is lost (a reply deadline passed, the server ended it, the socket
 * dropped, a heartbeat got no answer) it is destroyed and opened again with backoff until it is
 * up or closed; `setUp` then restores the session's state. Statements run one at a time.
 */
export class DedicatedConnection {
  readonly settings: ResolvedPgSettings;
  private client: pg.Client | undefined;
  private current: DedicatedState = 'connecting';
  private chain: Promise<unknown> = Promise.resolve();
  private heartbeat: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
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

  async close(): Promise<void> {
    if (this.current === 'closed') return;
    this.setState('closed', undefined);
    if (this.heartbeat) clearInterval(this.heartbeat);
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async open(reconnect: { previousPid: number | undefined } | undefined): Promise<pg.Client> {
    const client = new pg.Client(pgClientConfig(this.settings));
    // Errors before `adopt` are the attempt's own; after it they mean the connection was lost.
    client.on('error', () => undefined);
    try {
      await client.connect();
      await this.options.setUp(client, (text, values) => client.query(text, values), reconnect);
      return client;
    } catch (error) {
      destroy(client);
      throw error;
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
    this.scheduleReconnect({ previousPid });
  }

  private scheduleReconnect(reconnect: { previousPid: number | undefined }): void {
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
