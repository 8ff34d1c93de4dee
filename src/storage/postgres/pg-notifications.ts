import pg from 'pg';
import { InputError } from '../../common/errors.js';
import type { SqlClient } from '../sql-client.js';
import { DedicatedConnection, type DedicatedConnectionOptions, type DedicatedState, type SetupQuery } from './pg-dedicated-connection.js';

export interface PgNotificationsOptions extends Omit<DedicatedConnectionOptions, 'setUp'> {
  /** Where `notify` sends from by default: the pool, so a call inside a transaction fires on its commit. */
  notifier?: SqlClient;
}

/** Small on purpose: a notification names what changed (ids), and the listener reads the rest. */
export const MAX_PAYLOAD_BYTES = 1_000;
const TOPIC = /^[A-Za-z0-9_.-]{1,40}$/;

/**
 * LISTEN/NOTIFY on a connection of its own, so processes serving one schema hear each other's
 * changes. Topics are scoped to the schema. After a lost connection it reconnects with backoff,
 * LISTENs again, and tells `onResubscribed` listeners: notifications sent while it was away are
 * gone, so they re-read what they may have missed.
 */
export class PgNotifications {
  private readonly connection: DedicatedConnection;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private readonly resubscribed = new Set<() => void>();

  private constructor(private readonly options: PgNotificationsOptions) {
    this.connection = new DedicatedConnection({ ...options, setUp: (client, query, reconnect) => this.setUp(client, query, reconnect !== undefined) });
  }

  static async open(options: PgNotificationsOptions): Promise<PgNotifications> {
    const notifications = new PgNotifications(options);
    await notifications.connection.start();
    return notifications;
  }

  get state(): DedicatedState {
    return this.connection.state;
  }

  /** Calls `handler` with each payload sent on `topic`; resolves once listening. Returns a function that stops it. */
  async listen(topic: string, handler: (payload: string) => void): Promise<() => Promise<void>> {
    const channel = this.channel(topic);
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
      try {
        await this.connection.query(`LISTEN "${channel}"`);
      } catch (error) {
        if (this.handlers.get(channel)?.size === 0) this.handlers.delete(channel);
        throw error;
      }
    }
    set.add(handler);
    return async () => {
      const current = this.handlers.get(channel);
      if (!current?.delete(handler) || current.size > 0) return;
      this.handlers.delete(channel);
      await this.connection.query(`UNLISTEN "${channel}"`).catch(() => undefined);
    };
  }

  /**
   * Sends `payload` on `topic` through `via` (default: the `notifier` given at open, else this
   * connection). Through a `SqlClient` from inside its transaction, it is delivered on commit and
   * never if the transaction rolls back.
   */
  async notify(topic: string, payload: string, via: SqlClient | undefined = this.options.notifier): Promise<void> {
    const channel = this.channel(topic);
    if (Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES) {
      throw new InputError(`notification payload on ${topic} is ${Buffer.byteLength(payload)} bytes; at most ${MAX_PAYLOAD_BYTES}`, {
        hint: 'send ids and let listeners read the rest',
      });
    }
    if (via) await via.prepare('SELECT pg_notify(?, ?)').get(channel, payload);
    else await this.connection.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  /** Returns a function that removes the listener. */
  onResubscribed(listener: () => void): () => void {
    this.resubscribed.add(listener);
    return () => this.resubscribed.delete(listener);
  }

  /** Returns a function that removes the listener. */
  onStateChange(listener: (state: DedicatedState, error: unknown) => void): () => void {
    return this.connection.onStateChange(listener);
  }

  async close(): Promise<void> {
    this.handlers.clear();
    await this.connection.close();
  }

  private channel(topic: string): string {
    if (!TOPIC.test(topic)) throw new InputError(`notification topic "${topic}" must be 1-40 letters, digits, dots, dashes or underscores`);
    return `${this.connection.settings.schema}.${topic}`;
  }

  private async setUp(client: pg.Client, query: SetupQuery, reconnect: boolean): Promise<void> {
    client.on('notification', (message) => {
      const handlers = this.handlers.get(message.channel);
      for (const handler of handlers ?? []) {
        try {
          handler(message.payload ?? '');
        } catch {
          // One handler's failure must not keep the others from hearing.
        }
      }
    });
    if (this.handlers.size > 0) await query([...this.handlers.keys()].map((channel) => `LISTEN "${channel}"`).join('; '));
    if (!reconnect) return;
    // After the connection is adopted, so a listener that reads back finds it up.
    setImmediate(() => {
      for (const listener of this.resubscribed) {
        try {
          listener();
        } catch {
          // A broken listener must not stop the others.
        }
      }
    });
  }
}
