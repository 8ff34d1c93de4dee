import { randomUUID } from 'node:crypto';
import { parseChange, type ChangeFeed, type StoreChange } from '../../common/change-feed.js';
import type { SqlClient } from '../sql-client.js';
import { MAX_PAYLOAD_BYTES, PgNotifications } from './pg-notifications.js';

/** The topic every change travels on (the database's erasure trigger sends on it too). */
const CHANGES_TOPIC = 'changes';

export interface PgChangeFeedOptions {
  url: string;
  schema: string;
  /** The store's client: a change published inside its transaction is sent on commit. */
  db: SqlClient;
  applicationName?: string;
}

/**
 * The change feed of processes sharing one PostgreSQL schema, on LISTEN/NOTIFY: its own listening
 * connection (reconnected with backoff), notifications sent through the store's client. A
 * process does not hear itself: each change carries the id of the feed that sent it.
 */
export class PgChangeFeed implements ChangeFeed {
  readonly live = true;
  private readonly origin = randomUUID();
  private readonly handlers = new Set<(change: StoreChange) => void>();

  private constructor(
    private readonly notifications: PgNotifications,
    private readonly db: SqlClient,
  ) {}

  static async open(options: PgChangeFeedOptions): Promise<PgChangeFeed> {
    const notifications = await PgNotifications.open({
      settings: { url: options.url, schema: options.schema, applicationName: options.applicationName ?? 'magpie changes' },
      notifier: options.db,
    });
    const feed = new PgChangeFeed(notifications, options.db);
    try {
      await notifications.listen(CHANGES_TOPIC, (payload) => feed.deliver(payload));
    } catch (error) {
      await notifications.close();
      throw error;
    }
    return feed;
  }

  async publish(change: StoreChange): Promise<void> {
    await this.notifications.notify(CHANGES_TOPIC, this.encode(change), this.db);
  }

  subscribe(handler: (change: StoreChange) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  onResubscribed(handler: () => void): () => void {
    return this.notifications.onResubscribed(handler);
  }

  close(): Promise<void> {
    this.handlers.clear();
    return this.notifications.close();
  }

  /** The wire form; ids that would not fit are dropped (the listener re-reads the channel anyway). */
  private encode(change: StoreChange): string {
    const ids = [...(change.ids ?? [])];
    for (;;) {
      const payload = JSON.stringify({ ...change, ...(change.ids ? { ids } : {}), origin: this.origin });
      if (Buffer.byteLength(payload) <= MAX_PAYLOAD_BYTES || ids.length === 0) return payload;
      ids.splice(Math.floor(ids.length / 2));
    }
  }

  private deliver(payload: string): void {
    const change = parseChange(payload);
    if (!change || change.origin === this.origin) return;
    const { origin: _origin, ...rest } = change;
    for (const handler of this.handlers) {
      try {
        handler(rest);
      } catch {
        // One handler's failure must not keep the others from hearing.
      }
    }
  }
}
