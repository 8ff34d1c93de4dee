import { vectorToBlob } from './embedder.js';
import type { StoreContext } from './store-context.js';

/**
 * Items stored without a vector (written while the embedder was down) get one in the
 * background: a timer retries every `intervalMs` until every item has its vector.
 */
export class VectorBackfill {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly context: StoreContext,
    private readonly intervalMs: number,
  ) {}

  /**
   * Embeds items stored without a vector, at most `limit` of them. Returns how many got one;
   * rejects when the embedder still fails.
   */
  async run(limit = 256): Promise<number> {
    const { db, dialect, embedder, indexes } = this.context;
    const rows = (await db
      .prepare(
        `SELECT i.rowid, i.index_key, i.content, i.content_hash FROM memory_items i
          WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.item_rowid = i.rowid) ORDER BY i.rowid LIMIT ?`,
      )
      .all(limit)) as Array<{ rowid: number; index_key: string; content: string; content_hash: string }>;
    if (rows.length === 0) return 0;
    const vectors = await embedder.embed(rows.map((row) => row.content));
    this.context.assertOpen();
    const keys = new Set<string>();
    const insert = db.prepare('INSERT OR IGNORE INTO memory_vectors (item_rowid, index_key, vector) VALUES (?, ?, ?)');
    const settle = db.prepare('DELETE FROM memory_vector_backlog WHERE item_rowid = ?');
    await db.transaction(async () => {
      // Deleted or edited meanwhile, or being so now: an edit owes its vector anew, a deletion needs none.
      const unchanged = await dialect.unchangedItems(
        db,
        rows.map((row) => ({ rowid: row.rowid, contentHash: row.content_hash })),
      );
      for (const [position, row] of rows.entries()) {
        if (!unchanged.has(row.rowid)) continue;
        await insert.run(row.rowid, row.index_key, vectorToBlob(vectors[position]!));
        // Owed by the ingest backlog too: settled now.
        await settle.run(row.rowid);
        keys.add(row.index_key);
      }
    });
    for (const key of keys) indexes.noteInserted(key);
    return rows.length;
  }

  /** Items without a vector (the embedder was down when they were stored). */
  async missing(): Promise<number> {
    // Each vector belongs to one item (a unique key that cascades on delete), so the difference
    // of two counts is exact: two index walks instead of an anti-join probing every item, which
    // held the event loop for about 0.1 s at each start of a store of 100,000 messages.
    const row = (await this.context.db
      .prepare('SELECT (SELECT COUNT(*) FROM memory_items) - (SELECT COUNT(*) FROM memory_vectors) AS count')
      .get()) as { count: number };
    return Number(row.count);
  }

  /** Starts the background backfill (idempotent); it stops once every item has a vector. */
  schedule(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => {
      if (this.running) return;
      this.running = this.run()
        .then((done) => {
          if (done === 0) this.stop();
        })
        .catch(() => {
          // Still down: the next tick tries again.
        })
        .finally(() => {
          this.running = undefined;
        });
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a run in progress. */
  async close(): Promise<void> {
    this.stopped = true;
    this.stop();
    await this.running;
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
