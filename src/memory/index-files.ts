import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EventStream } from '../common/events.js';
import type { SqlClient } from '../storage/sql-client.js';
import { blobToVector } from './embedder.js';
import { moveAside, prepareIndexDirectory, removeIndexFile, saveIndexFile } from './index-file.js';
import { indexFileThread } from './index-file-thread.js';
import { padded } from './item-rows.js';
import { fnv1a } from './text.js';
import { HnswVectorIndex, type HnswParams } from './vector-index.js';

/** The file in the index directory naming its owner (see `memory_index_owners`). */
const OWNER_FILE = 'owner';

/** Points a rebuilt index has room for before its first growth. */
const REBUILD_START_CAPACITY = 8192;

/** One index key's HNSW index in memory, with what the manager tracks about it. */
export interface LoadedIndex {
  key: string;
  index: HnswVectorIndex;
  /** Largest `memory_vectors.seq` the index holds. */
  highWater: number;
  dirty: boolean;
  unsavedPoints: number;
  evicted: boolean;
  lastUsed: number;
  /** The save running now, then the one asked for meanwhile (see `IndexFiles.save`). */
  saving?: Promise<void>;
  queuedSave?: Promise<void>;
}

interface StateRow {
  high_water: number;
  point_count: number;
  identity: string;
}

export interface IndexFilesOptions {
  db: SqlClient;
  directory: string;
  dimension: number;
  params: HnswParams;
  /** Embedder and parameters; an index file made under another identity is never used. */
  identity: string;
  readOnly: boolean;
  events?: EventStream;
}

/**
 * The index files of the data dir and `memory_index_state`, which says what each file holds: a
 * file is loaded only when the database agrees with it (same identity, same point count, a
 * valid file), and saving writes the file first, then the state row.
 */
export class IndexFiles {
  readonly identity: string;
  private readonly readOnly: boolean;
  /** False when the index directory is unusable (read-only and not a directory): nothing is loaded or saved. */
  private directoryUsable = true;
  /**
   * Who these files belong to, kept in the directory: the state rows and tombstones of these
   * files are keyed by it, apart from those of other data dirs sharing the database.
   */
  private owner = '';
  private registered: Promise<void> | undefined;

  constructor(private readonly options: IndexFilesOptions) {
    this.identity = options.identity;
    this.readOnly = options.readOnly;
    this.prepareDirectory();
  }

  /** The key of `key`'s rows in `memory_index_state` and `memory_index_tombstones`. */
  stateKey(key: string): string {
    return this.owner === '' ? key : `${this.owner}|${key}`;
  }

  /** Whether an index file of `key` exists to be loaded. */
  hasFile(key: string): boolean {
    return this.directoryUsable && existsSync(this.fileFor(key));
  }

  /** Every file and state goes (embedder change); indexes rebuild on demand. */
  async dropAll(): Promise<void> {
    await this.options.db.exec('DELETE FROM memory_index_state; DELETE FROM memory_index_tombstones;');
    this.prepareDirectory();
    if (!this.directoryUsable) return;
    for (const name of readdirSync(this.options.directory)) {
      if (name.endsWith('.hnsw')) removeIndexFile(join(this.options.directory, name));
    }
  }

  /** The index of `key` from its file when the database vouches for it, else an empty one to rebuild. */
  async load(key: string): Promise<LoadedIndex> {
    const { db, dimension, params } = this.options;
    const file = this.fileFor(key);
    const state = (await db
      .prepare('SELECT high_water, point_count, identity FROM memory_index_state WHERE index_key = ?')
      .get(this.stateKey(key))) as StateRow | undefined;
    let entry: LoadedIndex | undefined;
    let reason = 'no saved index';
    if (!this.directoryUsable) reason = 'index directory unusable';
    else if (state && state.identity !== this.identity) reason = 'embedder or parameters changed';
    else if (state && !existsSync(file)) reason = 'index file missing';
    else if (state) {
      // Validated in full before hnswlib reads a byte of it: hnswlib trusts the sizes and links
      // it reads, so a garbled file would crash the process instead of failing to load.
      const check = await indexFileThread().check(file, {
        indexKey: key,
        identity: this.identity,
        dimension,
        pointCount: state.point_count,
        highWater: state.high_water,
      });
      if (!check.ok) {
        reason = check.reason;
        if (reason === 'index path is not a regular file' && !this.readOnly) {
          const movedTo = moveAside(file);
          this.options.events?.emit({ type: 'memory_index_path_moved', index_key: key, path: file, moved_to: movedTo ?? null, reason });
        }
      } else {
        try {
          const index = await HnswVectorIndex.load({ dimension, params, file });
          // A file that does not hold exactly what SQLite says it holds is not trusted.
          if (index.pointCount === state.point_count) {
            entry = { key, index, highWater: state.high_water, dirty: false, unsavedPoints: 0, evicted: false, lastUsed: 0 };
          } else {
            reason = `index file holds ${index.pointCount} points, database says ${state.point_count}`;
          }
        } catch {
          reason = 'index file unreadable';
        }
      }
    }
    if (entry) {
      const loaded = entry;
      const tombstones = await this.tombstones(key);
      for (const tombstone of tombstones) if (stale(tombstone, loaded)) loaded.index.remove(tombstone.label);
      if (tombstones.length > 0) entry.dirty = true;
      this.options.events?.emit({ type: 'memory_index_loaded', index_key: key, points: entry.index.pointCount });
    } else {
      const { total } = (await db.prepare('SELECT COUNT(*) AS total FROM memory_vectors WHERE index_key = ?').get(key)) as {
        total: number;
      };
      entry = {
        key,
        // Small at first and grown as the catch-up adds points: allocating room for a large
        // index takes longer than a search should, and this runs inside the search that found
        // the index missing.
        index: HnswVectorIndex.create({ dimension, params, capacity: Math.min(Math.ceil(total * 1.1) + 64, REBUILD_START_CAPACITY) }),
        highWater: 0,
        dirty: true,
        unsavedPoints: 0,
        evicted: false,
        lastUsed: 0,
      };
      if (!this.readOnly) await db.prepare('DELETE FROM memory_index_tombstones WHERE index_key = ?').run(this.stateKey(key));
      this.options.events?.emit({ type: 'memory_index_rebuild', index_key: key, reason, points: total });
    }
    return entry;
  }

  /**
   * Writes the index file and its sidecar (checksum, what it holds), then records in SQLite what
   * it holds; a crash between is detected at the next load. A failure to write (a full disk) is
   * reported and otherwise ignored: the index is derived, and SQLite still has every vector.
   */
  async save(entry: LoadedIndex): Promise<void> {
    // One save of an index at a time. Asked while one runs, one more follows it (shared by every
    // caller asking meanwhile), so each caller's changes are in a file when its call resolves.
    if (entry.queuedSave) return entry.queuedSave;
    const next = (entry.saving ?? Promise.resolve()).then(() => {
      entry.queuedSave = undefined;
      return this.saveNow(entry);
    });
    entry.saving = next;
    entry.queuedSave = next;
    try {
      await next;
    } finally {
      if (entry.saving === next) entry.saving = undefined;
    }
  }

  private async saveNow(entry: LoadedIndex): Promise<void> {
    if (!entry.dirty || this.readOnly || !this.directoryUsable) return;
    let applied: number[];
    try {
      // Deletions another process made (its tombstones for these files) go before the file is written.
      applied = await this.pendingTombstones(entry);
    } catch (error) {
      this.reportSaveFailure(entry, error);
      return;
    }
    const file = this.fileFor(entry.key);
    // What the file will hold: nothing changes the index while hnswlib writes it.
    const saved = { version: entry.index.version, points: entry.index.pointCount, highWater: entry.highWater };
    try {
      await saveIndexFile(
        file,
        (path) => entry.index.save(path),
        (path) => indexFileThread().digest(path),
        { index_key: entry.key, identity: this.identity, dimension: this.options.dimension, point_count: saved.points, high_water: saved.highWater },
      );
    } catch (error) {
      this.reportSaveFailure(entry, error);
      return;
    }
    try {
      await this.recordState(entry, saved, applied);
    } catch (error) {
      // The file is newer than the state row: the next load sees the mismatch and rebuilds.
      this.reportSaveFailure(entry, error);
      return;
    }
    // Points added or removed since the file was written stay unsaved.
    if (entry.index.version === saved.version && entry.highWater === saved.highWater) {
      entry.dirty = false;
      entry.unsavedPoints = 0;
    }
  }

  private reportSaveFailure(entry: LoadedIndex, error: unknown): void {
    this.options.events?.emit({
      type: 'memory_index_save_failed',
      index_key: entry.key,
      error: error instanceof Error ? error.message : String(error),
    });
  }

  /**
   * Registers this directory's owner (so deletions leave tombstones for its files from now on),
   * then takes the tombstones left for `entry` out of it. Returns their labels.
   */
  private async pendingTombstones(entry: LoadedIndex): Promise<number[]> {
    const db = this.options.db;
    if (this.owner !== '') {
      this.registered ??= db
        .prepare('INSERT OR IGNORE INTO memory_index_owners (owner, registered_at) VALUES (?, ?)')
        .run(this.owner, Date.now())
        .then(
          () => undefined,
          (error: unknown) => {
            this.registered = undefined;
            throw error;
          },
        );
      await this.registered;
    }
    const tombstones = await this.tombstones(entry.key);
    while (entry.index.busy) await entry.index.idle();
    const removed = tombstones.filter((tombstone) => stale(tombstone, entry));
    for (const tombstone of removed) entry.index.remove(tombstone.label);
    await this.restoreCaughtUp(
      entry,
      removed.map((tombstone) => tombstone.label),
    );
    return tombstones.map((tombstone) => tombstone.label);
  }

  /**
   * After `labels` were taken out of `entry`: an item among them that has a vector again (an
   * edit, a restated memory) which the index had already caught up with while the removal
   * waited gets that vector back. A catch-up adds a point and moves the high-water mark in one
   * step, so a vector past the mark is still to come, and one at or below it was added before.
   */
  async restoreCaughtUp(entry: LoadedIndex, labels: readonly number[]): Promise<void> {
    const db = this.options.db;
    for (let start = 0; start < labels.length; start += RESTORE_BATCH) {
      const list = padded(labels.slice(start, start + RESTORE_BATCH));
      const rows = (await db
        .prepare(`SELECT seq, item_rowid AS label, vector FROM memory_vectors WHERE index_key = ? AND item_rowid IN (${list.map(() => '?').join(', ')})`)
        .all(entry.key, ...list)) as Array<{ seq: number; label: number; vector: Buffer }>;
      if (rows.length === 0) continue;
      while (entry.index.busy) await entry.index.idle();
      for (const row of rows) if (Number(row.seq) <= entry.highWater) entry.index.add(Number(row.label), blobToVector(row.vector));
    }
  }

  /** The tombstones left for this directory's file of `key`, each with the seq of its item's vector now (if any). */
  private async tombstones(key: string): Promise<Tombstone[]> {
    const rows = (await this.options.db
      .prepare(
        `SELECT t.label AS label, v.seq AS seq FROM memory_index_tombstones t
          LEFT JOIN memory_vectors v ON v.item_rowid = t.label AND v.index_key = ?
          WHERE t.index_key = ?`,
      )
      .all(key, this.stateKey(key))) as Array<{ label: number; seq: number | null }>;
    return rows.map((row) => ({ label: Number(row.label), seq: row.seq === null ? undefined : Number(row.seq) }));
  }

  private async recordState(entry: LoadedIndex, saved: { points: number; highWater: number }, applied: readonly number[]): Promise<void> {
    const db = this.options.db;
    const key = this.stateKey(entry.key);
    // What the file holds: the index may have grown since it was written.
    const state = [key, saved.highWater, saved.points, this.identity, Date.now()];
    // Needs no lock across processes: these rows are this directory's alone (keyed by its owner),
    // the state is one upsert, and the tombstones cleared are exactly the ones this file applied.
    await db.transaction(async () => {
      await db
        .prepare(
          `INSERT INTO memory_index_state (index_key, high_water, point_count, identity, saved_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (index_key) DO UPDATE SET high_water = excluded.high_water, point_count = excluded.point_count,
             identity = excluded.identity, saved_at = excluded.saved_at`,
        )
        .run(...state);
      // Only the tombstones this file has applied: one left meanwhile stays for the next save or load.
      const remove = db.prepare('DELETE FROM memory_index_tombstones WHERE index_key = ? AND label = ?');
      for (const label of applied) await remove.run(key, label);
    });
  }

  /** A file (or anything but a directory) where the index directory belongs is moved aside. */
  private prepareDirectory(): void {
    const prepared = prepareIndexDirectory(this.options.directory, { readOnly: this.readOnly });
    this.directoryUsable = prepared.usable;
    this.owner = prepared.usable ? readOwner(this.options.directory, this.readOnly) : '';
    if (prepared.problem) {
      this.options.events?.emit({ type: 'memory_index_path_moved', path: this.options.directory, moved_to: prepared.movedTo ?? null, reason: prepared.problem });
    }
  }

  private fileFor(key: string): string {
    const readable = key.replace(/[^A-Za-z0-9-]/g, '_').slice(0, 48);
    return join(this.options.directory, `${readable}-${fnv1a(key).toString(16)}.hnsw`);
  }
}

/** The directory's owner id, created on first use when writable ('' when none can be had). */
function readOwner(directory: string, readOnly: boolean): string {
  const file = join(directory, OWNER_FILE);
  try {
    const owner = readFileSync(file, 'utf8').trim();
    if (/^[A-Za-z0-9-]{8,64}$/.test(owner)) return owner;
  } catch {
    // None yet.
  }
  if (readOnly) return '';
  const owner = randomUUID();
  try {
    writeFileSync(file, `${owner}\n`);
    return owner;
  } catch {
    return '';
  }
}

/** Labels looked up per statement by `restoreCaughtUp` (well under either backend's parameter limit). */
const RESTORE_BATCH = 512;

/** A tombstone: an item whose vector left this index (deleted, or replaced by an edit or a restatement). */
interface Tombstone {
  label: number;
  /** The seq of the item's vector now, when it has one again. */
  seq: number | undefined;
}

/**
 * Whether the point a tombstone names is still the old one. An edited or restated item gets its
 * new vector under the same label: once the index has caught up past that vector's seq, the
 * point is the new text's, and must stay.
 */
function stale(tombstone: Tombstone, entry: LoadedIndex): boolean {
  return tombstone.seq === undefined || tombstone.seq > entry.highWater;
}
