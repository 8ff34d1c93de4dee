import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { BacklogRow, MemoryDialect } from './dialect.js';
import { dot, type Embedder } from './embedder.js';
import type { VectorIndexManager } from './index-manager.js';
import { padded } from './item-rows.js';
import type { MemoryType } from './types.js';
import type { VectorHit } from './vector-index.js';

export interface VectorBacklogOptions {
  db: SqlClient;
  dialect: MemoryDialect;
  embedder: Embedder;
  indexes: VectorIndexManager;
  events?: EventStream;
  /** Items embedded and written per transaction. */
  batch?: number;
  /**
   * Most backlog rows one search embeds on the spot, default 256 (the rest is still found by full
   * text): embedding costs time per row, and a search must not slow down as ingest runs ahead.
   */
  maxScan?: number;
  /** How long new rows wait for company before a drain starts (default 10 ms). */
  delayMs?: number;
}

/** What a search learns from the backlog under the keys it can see. */
export interface BacklogScan {
  /** The exact similarity to the query of each owed row scanned (the newest `maxScan` under each key). */
  hits: VectorHit[];
  /**
   * Of these labels, those whose vector is owed. Whatever a vector index still holds for them was
   * made from an older text (the item was edited since), so only `hits` speaks for them.
   */
  owedAmong(labels: readonly number[]): Promise<ReadonlySet<number>>;
}

/** Vectors made at search time that are kept (a few times the rows one search embeds). */
const SCANNED_MAX = 2_048;

/** Waits after a failed embedding, doubling up to the maximum. */
const RETRY_MIN_MS = 500;
const RETRY_MAX_MS = 30_000;

/**
 * Items that were written (and made searchable by full text) before their vector: ingest puts a
 * message's history row and its transcript row in one transaction and leaves the embedding to
 * this class, which drains `memory_vector_backlog` in batches in the background. Until a row's
 * vector exists, `scan` gives search its exact similarity, so a message is found by meaning from
 * the moment its ingest resolved.
 */
export class VectorBacklog {
  private readonly batch: number;
  private readonly maxScan: number;
  private readonly delayMs: number;
  private running: Promise<void> | undefined;
  /** Asked for while a drain ran: it does not stop at an empty read. */
  private again = false;
  /** Vectors `scan` made for rows still in the backlog, by label, with the content they encode. */
  private readonly scanned = new Map<number, { hash: string; vector: Float32Array }>();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_MIN_MS;
  private closed = false;

  /** The wait before a scheduled drain, and what ends it early (close). */
  private delayTimer: NodeJS.Timeout | undefined;
  private wakeNow: (() => void) | undefined;

  constructor(private readonly options: VectorBacklogOptions) {
    this.batch = options.batch ?? 512;
    this.maxScan = options.maxScan ?? 256;
    this.delayMs = options.delayMs ?? 10;
  }

  /**
   * Starts draining shortly (after the transaction that filled the backlog has committed). The
   * short wait lets vectors of many ingest groups share one embedding batch and one commit;
   * search covers the lag meanwhile.
   */
  schedule(): void {
    // A drain under way may have read the backlog before these rows: it looks once more.
    if (this.running) this.again = true;
    if (this.closed || this.running || this.retryTimer) return;
    this.running = new Promise<void>((resolve) => {
      this.wakeNow = resolve;
      this.delayTimer = setTimeout(resolve, this.delayMs);
    }).then(() => {
      this.delayTimer = undefined;
      this.wakeNow = undefined;
      return this.drain();
    });
  }

  /** Resolves when the backlog is empty or the drain stopped on an error (it retries later). */
  async whenDrained(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Rows waiting for a vector (all keys, or the given ones). */
  async size(keys?: readonly string[]): Promise<number> {
    const { db } = this.options;
    if (!keys) return ((await db.prepare('SELECT COUNT(*) AS total FROM memory_vector_backlog').get()) as { total: number }).total;
    let total = 0;
    for (const key of keys) {
      total += ((await db.prepare('SELECT COUNT(*) AS total FROM memory_vector_backlog WHERE index_key = ?').get(key)) as { total: number }).total;
    }
    return total;
  }

  /**
   * Exact similarity of the newest backlog rows under `keys` to the query (embedding them now),
   * and which rows are owed. Empty when the backlog is empty, the usual case, at the cost of one
   * indexed lookup per key.
   */
  async scan(keys: readonly string[], queryVector: Float32Array, filter: { kind?: 'memory'; memoryType?: MemoryType } = {}): Promise<BacklogScan> {
    const rows: Array<{ label: number; content: string; content_hash: string }> = [];
    // A search of memories alone scans owed memories alone (of the type it asks for).
    const kindSql = `${filter.kind ? ` AND i.kind = 'memory'` : ''}${filter.memoryType ? ' AND i.memory_type = ?' : ''}`;
    const kindParams = filter.memoryType ? [filter.memoryType] : [];
    // Every owed row under the keys was read when no key filled its scan.
    let whole = true;
    for (const key of keys) {
      const owed = (await this.options.db
        .prepare(
          `SELECT b.item_rowid AS label, i.content, i.content_hash FROM memory_vector_backlog b JOIN memory_items i ON i.rowid = b.item_rowid
           WHERE b.index_key = ?${kindSql} ORDER BY b.item_rowid DESC LIMIT ?`,
        )
        .all(key, ...kindParams, this.maxScan)) as Array<{ label: number; content: string; content_hash: string }>;
      if (owed.length >= this.maxScan) whole = false;
      rows.push(...owed);
    }
    const scanned = new Set(rows.map((row) => row.label));
    const owedAmong = async (labels: readonly number[]): Promise<ReadonlySet<number>> => {
      const known = labels.filter((label) => scanned.has(label));
      if (whole || labels.length === 0) return new Set(known);
      const list = padded(labels);
      const more = (await this.options.db
        .prepare(`SELECT item_rowid AS label FROM memory_vector_backlog WHERE item_rowid IN (${list.map(() => '?').join(', ')})`)
        .all(...list)) as Array<{ label: number }>;
      return new Set([...known, ...more.map((row) => Number(row.label))]);
    };
    return { hits: await this.similarities(rows, queryVector), owedAmong };
  }

  /** The rows' exact similarities to the query: each embedded once while its text stays the same. */
  private async similarities(rows: ReadonlyArray<{ label: number; content: string; content_hash: string }>, queryVector: Float32Array): Promise<VectorHit[]> {
    if (rows.length === 0) return [];
    // Successive searches see mostly the same backlog rows: each is embedded once, not per search.
    const missing = rows.filter((row) => this.scanned.get(row.label)?.hash !== row.content_hash);
    if (missing.length > 0) {
      try {
        const vectors = await this.options.embedder.embed(missing.map((row) => row.content));
        missing.forEach((row, position) => this.scanned.set(row.label, { hash: row.content_hash, vector: vectors[position]! }));
      } catch {
        return []; // The embedder is down: full text still finds these rows.
      }
      // Oldest first in the map's order: what is beyond the bound has long left the backlog.
      for (const label of this.scanned.keys()) {
        if (this.scanned.size <= SCANNED_MAX) break;
        this.scanned.delete(label);
      }
    }
    const hits: VectorHit[] = [];
    for (const row of rows) {
      const known = this.scanned.get(row.label);
      if (known?.hash === row.content_hash) hits.push({ label: row.label, similarity: dot(queryVector, known.vector) });
    }
    return hits;
  }

  /**
   * Stops background work; first drains what is left for at most `budgetMs` (a short CLI run
   * leaves complete vectors behind, a shutdown does not hang on a slow embedder).
   */
  async close(budgetMs = 10_000): Promise<void> {
    // A drain still waiting out its delay starts now: closing never waits for company.
    if (this.delayTimer) clearTimeout(this.delayTimer);
    this.wakeNow?.();
    await this.whenDrained();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const deadline = performance.now() + budgetMs;
    try {
      while (performance.now() < deadline && (await this.step()) > 0) {
        // Keep going: each step is one batch.
      }
    } catch {
      // Left for the next start, which drains the backlog again.
    }
    this.closed = true;
  }

  private async drain(): Promise<void> {
    try {
      for (;;) {
        if (this.closed) return;
        this.again = false;
        const done = await this.step();
        if (done === 0 && !this.again) break;
        // Let the event loop breathe between batches: ingest and turns come first.
        await new Promise((resolve) => setImmediate(resolve));
      }
      this.retryMs = RETRY_MIN_MS;
    } catch (error) {
      if (this.closed) return;
      this.options.events?.emit({ type: 'memory_vectors_delayed', reason: errorMessage(error), retry_ms: this.retryMs });
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.schedule();
      }, this.retryMs);
      this.retryTimer.unref();
      this.retryMs = Math.min(RETRY_MAX_MS, this.retryMs * 2);
    } finally {
      this.running = undefined;
    }
  }

  /** Embeds and writes one batch; returns how many rows it took off the backlog. */
  private async step(): Promise<number> {
    const { db, dialect } = this.options;
    const rows = (await db
      .prepare(
        `SELECT b.item_rowid AS rowid, b.index_key, i.content, i.content_hash FROM memory_vector_backlog b
         JOIN memory_items i ON i.rowid = b.item_rowid ORDER BY b.item_rowid LIMIT ?`,
      )
      .all(this.batch)) as BacklogRow[];
    if (rows.length === 0) return 0;
    const vectors = await this.options.embedder.embed(rows.map((row) => row.content));
    // One transaction per batch, each row checked against edits and deletions made meanwhile.
    const { written, keys } = await dialect.writeBacklogVectors(db, rows, vectors);
    for (const row of rows) this.scanned.delete(row.rowid);
    for (const key of keys) this.options.indexes.noteInserted(key);
    // Rows edited meanwhile stay in the backlog: count them as progress only if something moved.
    return written > 0 ? rows.length : 0;
  }
}
