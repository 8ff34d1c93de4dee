import type { EventStream } from '../common/events.js';
import type { SqlClient } from '../storage/sql-client.js';
import { blobToVector, dot } from './embedder.js';
import { IndexFiles, type LoadedIndex } from './index-files.js';
import type { HnswParams, VectorHit } from './vector-index.js';

export interface IndexManagerOptions {
  db: SqlClient;
  /** Where index files live: `<dataDir>/index`. */
  directory: string;
  dimension: number;
  /** Embedder identity; an index built with another one is never used. */
  embedderIdentity: string;
  params: HnswParams;
  /** Indexes kept in memory at once; the least recently used beyond this are saved and dropped. */
  maxLoaded?: number;
  /** An index not searched for this long is saved and dropped at the next search (default 10 min). */
  idleMs?: number;
  /** Longest stretch of index building done in one event-loop turn, in ms. */
  sliceMs?: number;
  /** Unsaved points after which a catching-up index is written to disk. */
  saveEvery?: number;
  /**
   * Most not-yet-indexed vectors scanned exactly per search (the newest ones), default 1,000. A
   * rebuild makes the tail as long as the index; scanning a bounded part keeps a search's cost
   * the same however far behind the index is, and the older entries are still found by full text.
   */
  maxTailScan?: number;
  /** Receives `memory_index_loaded` and `memory_index_rebuild` events (no content, only ids and counts). */
  events?: EventStream;
  /**
   * A reader beside the writer, or on a read-only data dir: indexes are built in memory when the
   * files cannot be trusted, and nothing is ever written (files, states, tombstones).
   */
  readOnly?: boolean;
  /** Called as an index catches up (a rebuild): points in it and points it will hold (CLI progress). */
  onIndexProgress?: (progress: IndexProgress) => void;
}

/** How far an index that is catching up with SQLite has come. */
export interface IndexProgress {
  indexKey: string;
  indexed: number;
  total: number;
}

/** A vector not in its index yet, decoded. */
interface TailRow {
  seq: number;
  label: number;
  vector: Float32Array;
}

/** Tails at least this long are kept decoded between searches. */
const TAIL_CACHE_MIN = 256;
/** Vectors a catch-up reads at a time; a 15 ms slice takes in about 40 of them. */
const CATCH_UP_READ = 64;
/** Points added between two looks at the clock during a catch-up. */
const CATCH_UP_CHECK_EVERY = 8;

/**
 * Owns the HNSW index of every index key (a channel, a DM user): loads it lazily from its file,
 * trusts the file only when `memory_index_state` in SQLite agrees with it (same embedder and
 * parameters, same point count), otherwise rebuilds from the vectors in SQLite. Vectors not yet
 * in the index (above its high-water mark) are found by exact scan, so an insert is searchable at
 * once while the index catches up in short slices between other work.
 */
export class VectorIndexManager {
  /** Decoded long tails of indexes catching up (see `tailOf`). */
  private readonly tails = new Map<string, { entry: LoadedIndex; newest: number; rows: TailRow[] }>();
  /** Moves at every deletion, so a tail read before it is not kept after it. */
  private tailGeneration = 0;
  private readonly loaded = new Map<string, LoadedIndex>();
  /** Indexes being read from disk or the database: a second caller waits for the same load. */
  private readonly loading = new Map<string, Promise<LoadedIndex>>();
  /** Saves of indexes evicted from memory, by key, until they are written. */
  private readonly leaving = new Map<string, Promise<void>>();
  private readonly maxLoaded: number;
  private readonly idleMs: number;
  private readonly sliceMs: number;
  private readonly saveEvery: number;
  private readonly files: IndexFiles;
  private pending: Promise<void> | undefined;
  private scheduled = new Set<string>();
  private closed = false;
  private readonly maxTailScan: number;
  private readonly readOnly: boolean;

  constructor(private readonly options: IndexManagerOptions) {
    this.maxTailScan = options.maxTailScan ?? 1_000;
    this.maxLoaded = options.maxLoaded ?? 64;
    this.idleMs = options.idleMs ?? 10 * 60_000;
    this.sliceMs = options.sliceMs ?? 15;
    this.saveEvery = options.saveEvery ?? 20_000;
    const { m, efConstruction } = options.params;
    this.readOnly = options.readOnly === true;
    this.files = new IndexFiles({
      db: options.db,
      directory: options.directory,
      dimension: options.dimension,
      params: options.params,
      identity: `${options.embedderIdentity}|m${m}|efc${efConstruction}`,
      readOnly: this.readOnly,
      ...(options.events ? { events: options.events } : {}),
    });
  }

  /**
   * The nearest vectors of one index key: HNSW over what is indexed plus an exact scan of the
   * tail not indexed yet, both restricted by `filter` before the top `k` is taken.
   */
  async search(key: string, vector: Float32Array, k: number, filter?: (label: number) => boolean): Promise<VectorHit[]> {
    const entry = await this.acquire(key);
    const hits = new Map<number, number>();
    for (const hit of entry.index.search(vector, k, filter)) hits.set(hit.label, hit.similarity);
    const tail = await this.tailOf(entry);
    for (const row of tail) {
      if (row.seq <= entry.highWater) continue; // Indexed since the tail was read.
      if (filter && !filter(row.label)) continue;
      // The tail holds the newest vector of a label; it wins over an older one in the graph.
      hits.set(row.label, dot(vector, row.vector));
    }
    if (tail.length > 0) this.scheduleCatchUp(entry);
    return [...hits]
      .map(([label, similarity]) => ({ label, similarity }))
      .sort((left, right) => right.similarity - left.similarity)
      .slice(0, k);
  }

  /**
   * The newest not-yet-indexed vectors of an index (at most `maxTailScan`). While an index
   * rebuilds, its tail is long and the same newest rows would be read and decoded by every
   * search: they are kept in memory until a vector is written under the key (the newest `seq`
   * moves), so a search during a rebuild costs one indexed lookup plus the dot products.
   */
  private async tailOf(entry: LoadedIndex): Promise<TailRow[]> {
    const { db } = this.options;
    let cached = this.tails.get(entry.key);
    if (cached && entry.highWater >= cached.newest) {
      this.tails.delete(entry.key); // Caught up: what it held is in the index now.
      cached = undefined;
    }
    let newest: number | undefined;
    if (cached) {
      // Only a kept tail pays for this lookup; an ordinary search reads its short tail at once.
      newest =
        ((await db.prepare('SELECT MAX(seq) AS seq FROM memory_vectors WHERE index_key = ?').get(entry.key)) as { seq: number | null }).seq ?? 0;
      if (cached.newest === newest && cached.entry === entry && this.tails.get(entry.key) === cached) return cached.rows;
    }
    const generation = this.tailGeneration;
    const rows = (
      (await db
        .prepare('SELECT seq, item_rowid AS label, vector FROM memory_vectors WHERE index_key = ? AND seq > ? ORDER BY seq DESC LIMIT ?')
        .all(entry.key, entry.highWater, this.maxTailScan)) as Array<{ seq: number; label: number; vector: Buffer }>
    ).map((row) => ({ seq: row.seq, label: row.label, vector: blobToVector(row.vector) }));
    // A short tail (ordinary ingest) is cheap to read again; only a long one is worth keeping.
    // A deletion that came in while the rows were read may have removed some: not kept then.
    if (rows.length >= TAIL_CACHE_MIN && generation === this.tailGeneration) {
      this.tails.set(entry.key, { entry, newest: Math.max(newest ?? 0, rows[0]!.seq), rows });
    } else {
      this.tails.delete(entry.key);
    }
    return rows;
  }

  /** New vectors were written under `key`: a loaded index starts catching up. */
  noteInserted(key: string): void {
    const entry = this.loaded.get(key);
    if (entry) this.scheduleCatchUp(entry);
  }

  /**
   * Items are leaving the database: inside the transaction that deletes them, their labels are
   * remembered as tombstones, so that an index file written before the deletion is corrected
   * when loaded. `applyDeleted` follows once that transaction has committed.
   */
  async recordDeleted(key: string, labels: readonly number[]): Promise<void> {
    if (labels.length === 0) return;
    if (this.readOnly) return;
    // One tombstone per directory whose files may hold the point (every registered owner, this
    // one included): a process's save clears only its own. Files never saved have no owner row
    // yet, and no stale point either.
    const insert = this.options.db.prepare(
      `INSERT OR IGNORE INTO memory_index_tombstones (index_key, label) SELECT owner || '|' || ?, CAST(? AS BIGINT) FROM memory_index_owners`,
    );
    for (const label of labels) await insert.run(key, label);
  }

  /**
   * After the deletion committed: the labels leave the loaded index and its file. Never called
   * inside a transaction: it may wait for an index another caller is loading, whose reads would
   * wait for that transaction.
   */
  async applyDeleted(key: string, labels: readonly number[]): Promise<void> {
    if (labels.length === 0) return;
    this.tails.delete(key); // It may hold vectors of the deleted items.
    this.tailGeneration += 1;
    if (this.readOnly) return;
    // Deleted means gone from the index file too, not only flagged in memory: a file on disk
    // is loaded (its tombstones scrub the points), and written back at once.
    // An index evicted a moment ago may still be on its way to its first file, with the deleted
    // points in it: loading it waits for that save, and the points are taken out after.
    const entry = this.loaded.get(key) ?? (this.files.hasFile(key) || this.leaving.has(key) ? await this.acquire(key) : undefined);
    if (!entry) return;
    while (entry.index.busy) await entry.index.idle();
    for (const label of labels) entry.index.remove(label);
    entry.dirty = true;
    // An edited item's new vector may have been indexed while this waited: it goes back in.
    await this.files.restoreCaughtUp(entry, labels);
    await this.files.save(entry);
  }

  /** Saves and drops the index of `key` if it is loaded (its channel was unloaded). */
  async unload(key: string): Promise<void> {
    const entry = this.loaded.get(key);
    if (!entry) return;
    this.loaded.delete(key);
    this.tails.delete(key);
    entry.evicted = true;
    this.saveLeaving(entry);
    await this.leaving.get(key);
  }

  /** Indexes loaded in memory now. */
  get loadedCount(): number {
    return this.loaded.size;
  }

  /** Resolves once every scheduled catch-up has finished (tests, benchmarks, shutdown). */
  async whenIdle(): Promise<void> {
    while (this.pending) await this.pending;
  }

  /** Indexed and not-yet-indexed vectors of the given keys (all keys when absent). */
  async counts(keys?: readonly string[]): Promise<{ indexed: number; pending: number }> {
    const db = this.options.db;
    let indexed = 0;
    let pending = 0;
    const keyList =
      keys ?? ((await db.prepare('SELECT DISTINCT index_key AS key FROM memory_vectors').all()) as { key: string }[]).map((row) => row.key);
    for (const key of keyList) {
      const state = (await db.prepare('SELECT high_water FROM memory_index_state WHERE index_key = ? AND identity = ?').get(this.files.stateKey(key), this.files.identity)) as
        | { high_water: number }
        | undefined;
      const entry = this.loaded.get(key);
      const highWater = entry?.highWater ?? state?.high_water ?? 0;
      const row = (await db
        .prepare('SELECT SUM(CASE WHEN seq <= ? THEN 1 ELSE 0 END) AS indexed, SUM(CASE WHEN seq > ? THEN 1 ELSE 0 END) AS pending FROM memory_vectors WHERE index_key = ?')
        .get(highWater, highWater, key)) as { indexed: number | null; pending: number | null };
      indexed += row.indexed ?? 0;
      pending += row.pending ?? 0;
    }
    return { indexed, pending };
  }

  /** Loads (or starts rebuilding) the index of `key` now, so that `close` leaves it saved. */
  async warm(key: string): Promise<void> {
    await this.acquire(key);
  }

  /** Forgets every index (embedder change): files and states go, indexes rebuild on demand. */
  async dropAll(): Promise<void> {
    for (const entry of this.loaded.values()) entry.evicted = true;
    this.loaded.clear();
    this.tails.clear();
    if (this.readOnly) return;
    await this.files.dropAll();
  }

  /**
   * Stops background work, brings loaded indexes up to date for at most `catchUpMs` in total
   * (a short-lived CLI run should leave a complete index behind; a shutdown must not hang on a
   * huge rebuild, whose remainder simply continues at the next start), and writes them to disk.
   */
  async close(options: { catchUpMs?: number } = {}): Promise<void> {
    this.closed = true;
    this.tails.clear();
    await this.whenIdle();
    await Promise.allSettled([...this.loading.values()]);
    await Promise.allSettled([...this.leaving.values()]);
    if (this.readOnly) {
      this.loaded.clear();
      return;
    }
    const deadline = performance.now() + (options.catchUpMs ?? 30_000);
    for (const entry of this.loaded.values()) {
      await this.catchUp(entry, Math.max(0, deadline - performance.now()));
      await this.files.save(entry);
    }
    this.loaded.clear();
  }

  /** The index of a key, loaded (or rebuilt) if needed; marks it most recently used. */
  private async acquire(key: string): Promise<LoadedIndex> {
    let entry = this.loaded.get(key);
    if (entry) {
      this.loaded.delete(key);
    } else {
      let loading = this.loading.get(key);
      if (!loading) {
        // An evicted copy still being written is waited for: its file is what gets loaded.
        const leaving = this.leaving.get(key) ?? Promise.resolve();
        loading = leaving
          .then(() => this.files.load(key))
          .then((loaded) => {
            this.scheduleCatchUp(loaded);
            return loaded;
          })
          .finally(() => this.loading.delete(key));
        this.loading.set(key, loading);
      }
      entry = await loading;
      // Another caller of the same load (or a use since) has placed it already.
      this.loaded.delete(key);
    }
    const now = performance.now();
    entry.lastUsed = now;
    this.loaded.set(key, entry);
    // The map is in least-recently-used order: evict from the front while over the cap or idle.
    const evicted: LoadedIndex[] = [];
    for (const [oldestKey, oldest] of this.loaded) {
      if (oldest === entry) break;
      if (this.loaded.size <= this.maxLoaded && now - oldest.lastUsed < this.idleMs) break;
      this.loaded.delete(oldestKey);
      this.tails.delete(oldestKey);
      oldest.evicted = true;
      evicted.push(oldest);
    }
    // Written in the background: a search does not wait for another channel's file.
    for (const oldest of evicted) this.saveLeaving(oldest);
    return entry;
  }

  /** Saves an index that left memory; a load of its key waits for it, and so does `close`. */
  private saveLeaving(entry: LoadedIndex): void {
    const previous = this.leaving.get(entry.key) ?? Promise.resolve();
    // A save reports its own failures (`memory_index_save_failed`); the file is only derived.
    const saving = previous.then(() => this.files.save(entry)).catch(() => {});
    this.leaving.set(entry.key, saving);
    void saving.finally(() => {
      if (this.leaving.get(entry.key) === saving) this.leaving.delete(entry.key);
    });
  }

  /** Adds tail vectors to the index for at most `budgetMs`; returns true when it is up to date. */
  private async catchUp(entry: LoadedIndex, budgetMs: number): Promise<boolean> {
    const started = performance.now();
    const { db } = this.options;
    const select = db.prepare('SELECT seq, item_rowid AS label, vector FROM memory_vectors WHERE index_key = ? AND seq > ? ORDER BY seq LIMIT ?');
    const report = this.options.onIndexProgress;
    const total = report
      ? entry.index.pointCount +
        ((await db.prepare('SELECT COUNT(*) AS rest FROM memory_vectors WHERE index_key = ? AND seq > ?').get(entry.key, entry.highWater)) as { rest: number }).rest
      : 0;
    for (;;) {
      const after = entry.highWater;
      const rows = (await select.all(entry.key, after, CATCH_UP_READ)) as Array<{ seq: number; label: number; vector: Buffer }>;
      // The index is being written to its file: the points go in once it is written.
      while (entry.index.busy) await entry.index.idle();
      // Another catch-up of the same index (a close beside a scheduled slice) moved it meanwhile.
      if (entry.highWater !== after) continue;
      if (rows.length === 0) return true;
      report?.({ indexKey: entry.key, indexed: entry.index.pointCount + rows.length, total });
      // A point costs about 0.4 ms at M = 16, so a whole read of 64 would hold the event loop
      // for 25 ms: the budget is checked every few points, and the rest is read again next time.
      let overBudget = false;
      for (const [position, row] of rows.entries()) {
        entry.index.add(row.label, blobToVector(row.vector));
        entry.highWater = row.seq;
        entry.dirty = true;
        entry.unsavedPoints += 1;
        if (position % CATCH_UP_CHECK_EVERY === CATCH_UP_CHECK_EVERY - 1 && performance.now() - started >= budgetMs) {
          overBudget = true;
          break;
        }
      }
      if (entry.unsavedPoints >= this.saveEvery) await this.files.save(entry);
      if (overBudget || performance.now() - started >= budgetMs) return false;
    }
  }

  private scheduleCatchUp(entry: LoadedIndex): void {
    const { key } = entry;
    if (this.closed || this.scheduled.has(key)) return;
    this.scheduled.add(key);
    // The queue holds the key, not the index: an index evicted while its turn waits (a burst of
    // searches over many channels) is freed at once, not when the queue reaches it.
    const run = (resolve: () => void): void => {
      setImmediate(() => {
        const current = this.loaded.get(key);
        if (!current || current.evicted || this.closed) {
          this.scheduled.delete(key);
          resolve();
          return;
        }
        void this.catchUp(current, this.sliceMs)
          .catch(() => true) // The database went away (closed); the next load starts over from it.
          .then((done) => {
            if (done) {
              this.scheduled.delete(key);
              resolve();
            } else {
              run(resolve);
            }
          }, resolve);
      });
    };
    const previous = this.pending ?? Promise.resolve();
    const mine = previous.then(() => new Promise<void>((resolve) => run(resolve)));
    this.pending = mine;
    void mine.then(() => {
      if (this.pending === mine) this.pending = undefined;
    });
  }
}
