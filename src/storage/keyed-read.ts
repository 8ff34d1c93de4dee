import type { SqlClient, SqlQuery } from './sql-client.js';

/** Most keys one gathered statement asks for; a larger burst takes several. */
const MOST_KEYS = 1_000;

/**
 * A read of the rows belonging to one key (a channel id), written once with an `@key`
 * parameter. On SQLite each call runs it for its key: a statement costs microseconds there. On
 * PostgreSQL the keys asked for during one turn of the event loop go in one statement (the read
 * run for each key of an array through a lateral join), and each caller gets its key's rows: a
 * burst that opens a thousand channels asks a few statements, not a thousand of each. Inside a
 * transaction a call runs alone, on the transaction's connection, as any statement does.
 */
export class KeyedRead {
  private readonly single: SqlQuery;
  private readonly gathered: SqlQuery | undefined;
  private waiting = new Map<string, Array<{ resolve: (rows: unknown[]) => void; reject: (error: unknown) => void }>>();
  private scheduled = false;

  /**
   * `sql` reads one key's rows with `@key` wherever the key goes; `order` sorts a key's rows
   * when they come from the gathered statement (a lateral join promises no order across keys,
   * nor, strictly, within one).
   */
  constructor(
    private readonly db: SqlClient,
    sql: string,
    private readonly order?: (left: Record<string, unknown>, right: Record<string, unknown>) => number,
  ) {
    this.single = db.prepare(sql);
    this.gathered =
      db.dialect === 'postgres'
        ? db.prepare(
            `SELECT keys.key AS gathered_key, matched.* FROM unnest(@keys::text[]) AS keys(key)
             CROSS JOIN LATERAL (${sql.replaceAll('@key', 'keys.key')}) AS matched`,
          )
        : undefined;
  }

  /** The key's rows, as the statement returns them for it alone. */
  rows(key: string): Promise<unknown[]> {
    if (!this.gathered || this.db.inTransaction) return this.single.all({ key });
    return new Promise((resolve, reject) => {
      let waiters = this.waiting.get(key);
      if (!waiters) {
        waiters = [];
        this.waiting.set(key, waiters);
      }
      waiters.push({ resolve, reject });
      if (this.waiting.size >= MOST_KEYS) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** The key's first row, or undefined. */
  async row(key: string): Promise<unknown> {
    return (await this.rows(key))[0];
  }

  /**
   * The rows of several keys at once, where the caller's context says (in its transaction, if
   * it is in one): one statement on PostgreSQL, one run for each key on SQLite.
   */
  async many(keys: readonly string[]): Promise<Map<string, unknown[]>> {
    const distinct = [...new Set(keys)];
    if (!this.gathered) return new Map(await Promise.all(distinct.map(async (key) => [key, await this.single.all({ key })] as const)));
    const byKey = new Map<string, unknown[]>(distinct.map((key) => [key, []]));
    for (const row of (await this.gathered.all({ keys: distinct })) as Array<Record<string, unknown>>) {
      const { gathered_key: key, ...rest } = row;
      byKey.get(key as string)?.push(rest);
    }
    if (this.order) for (const rows of byKey.values()) (rows as Array<Record<string, unknown>>).sort(this.order);
    return byKey;
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.waiting;
    if (batch.size === 0) return;
    this.waiting = new Map();
    this.many([...batch.keys()]).then(
      (byKey) => {
        for (const [key, waiters] of batch) {
          const found = byKey.get(key) ?? [];
          for (const waiter of waiters) waiter.resolve(waiters.length > 1 ? [...found] : found);
        }
      },
      (error: unknown) => {
        for (const waiters of batch.values()) for (const waiter of waiters) waiter.reject(error);
      },
    );
  }
}
