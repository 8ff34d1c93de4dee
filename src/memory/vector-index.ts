import hnswlib from 'hnswlib-node';

/** HNSW build and search parameters (chosen by measurement; see bench/memory-vector.ts). */
export interface HnswParams {
  /** Graph degree. */
  m: number;
  /** Candidate list size while inserting. */
  efConstruction: number;
  /** Candidate list size while searching (raised to k when k is larger). */
  efSearch: number;
}

export const DEFAULT_HNSW_PARAMS: Readonly<HnswParams> = Object.freeze({ m: 16, efConstruction: 64, efSearch: 64 });

export interface VectorHit {
  label: number;
  /** Cosine similarity in [-1, 1]. */
  similarity: number;
}

/** What hnswlib allocates per index whatever its size: 65,536 label locks of 40 bytes. */
const NATIVE_FIXED_BYTES = 65_536 * 40;

/**
 * Per native index, an untouched buffer of its size (it costs no resident memory). V8 does not
 * see hnswlib's memory, so without it a dropped index is freed only at a GC that a small heap
 * never needs: searching thousands of channels in turn then grows RSS by ~2.6 MB per channel.
 * Counted as external memory, it makes V8 collect dropped indexes as it collects buffers.
 */
const nativeWeights = new WeakMap<hnswlib.HierarchicalNSW, ArrayBuffer>();

/**
 * One approximate nearest-neighbour index over unit vectors (cosine), labelled by item rowid.
 * A thin wrapper over hnswlib-node that grows itself and tolerates deleted points.
 */
export class HnswVectorIndex {
  private readonly index: hnswlib.HierarchicalNSW;
  private deleted = 0;
  /** Counts every add and remove, so a save knows whether what it wrote is still all there is. */
  private changes = 0;
  /** Labels whose point this process has scrubbed and flagged (see `remove`). */
  private readonly scrubbed = new Set<number>();
  /** Set while hnswlib writes the index to a file on its own thread: nothing may change it then. */
  private writing: Promise<void> | undefined;

  private constructor(
    readonly dimension: number,
    private readonly params: HnswParams,
    index: hnswlib.HierarchicalNSW,
  ) {
    this.index = index;
    this.weigh();
  }

  private weigh(): void {
    nativeWeights.set(this.index, new ArrayBuffer(this.nativeBytes()));
  }

  /** About what hnswlib holds for this index: its locks, plus vector and links per slot. */
  private nativeBytes(): number {
    return NATIVE_FIXED_BYTES + this.index.getMaxElements() * (this.dimension * 4 + this.params.m * 12 + 64);
  }

  static create(options: { dimension: number; params: HnswParams; capacity: number }): HnswVectorIndex {
    const index = new hnswlib.HierarchicalNSW('cosine', options.dimension);
    index.initIndex({
      maxElements: Math.max(64, options.capacity),
      m: options.params.m,
      efConstruction: options.params.efConstruction,
      randomSeed: 100,
    });
    return new HnswVectorIndex(options.dimension, options.params, index);
  }

  /**
   * Reads an index file on hnswlib's thread pool (a large one takes a few hundred ms); throws
   * when it is unreadable or of another dimension.
   */
  static async load(options: { dimension: number; params: HnswParams; file: string }): Promise<HnswVectorIndex> {
    const index = new hnswlib.HierarchicalNSW('cosine', options.dimension);
    await index.readIndex(options.file);
    if (index.getNumDimensions() !== options.dimension) {
      throw new Error(`index file has dimension ${index.getNumDimensions()}, expected ${options.dimension}`);
    }
    return new HnswVectorIndex(options.dimension, options.params, index);
  }

  /** Points ever added, deleted ones included (what the file holds). */
  get pointCount(): number {
    return this.index.getCurrentCount();
  }

  get liveCount(): number {
    return this.index.getCurrentCount() - this.deleted;
  }

  /** Adds and removes so far: equal before and after a save when nothing changed meanwhile. */
  get version(): number {
    return this.changes;
  }

  /**
   * Whether hnswlib is writing the index to a file now. A caller about to change the index waits
   * with `while (index.busy) await index.idle();` and then changes it without awaiting anything
   * in between: a write may start in any await (`add` and `remove` refuse during one).
   */
  get busy(): boolean {
    return this.writing !== undefined;
  }

  /** Resolves when the write in flight (if any) has ended; see `busy`. */
  async idle(): Promise<void> {
    await this.writing;
  }

  private assertNotWriting(): void {
    // hnswlib's writer thread reads the graph and vectors as they are: growing or changing them
    // under it would write a torn file, or read freed memory.
    if (this.writing) throw new Error('the index is being written to its file: await idle() before changing it');
  }

  /** Adds a point, or replaces the vector of an existing label. */
  add(label: number, vector: Float32Array): void {
    this.assertNotWriting();
    this.changes += 1;
    // A label scrubbed before (an edited item) comes back live under its new vector.
    if (this.scrubbed.delete(label)) this.deleted -= 1;
    const count = this.index.getCurrentCount();
    const capacity = this.index.getMaxElements();
    // Grow geometrically so that inserts stay amortized O(1) in resizes.
    if (count >= capacity) {
      this.index.resizeIndex(Math.max(64, Math.ceil(capacity * 1.5)));
      this.weigh();
    }
    this.index.addPoint(Array.from(vector), label);
  }

  /**
   * Deletes a label for good: its vector is overwritten before the point is marked deleted,
   * since hnswlib only flags a deleted point and would write its vector to the next file (a
   * flag that anyone can clear again). Unknown labels are ignored (the file may predate them).
   */
  remove(label: number): void {
    this.assertNotWriting();
    // Scrubbed here already (a delete, then its own tombstone at the next save): once is enough,
    // and each scrub re-links the point's neighbours, tens of ms in a large index.
    if (this.scrubbed.has(label)) return;
    this.changes += 1;
    let wasDeleted = false;
    try {
      // A point flagged by an older file still carries its vector: it is scrubbed as well.
      this.index.unmarkDelete(label);
      wasDeleted = true;
    } catch {
      // Live, or not in this index.
    }
    try {
      this.index.getPoint(label);
    } catch {
      return; // Not in this index (never added): nothing to do.
    }
    this.index.addPoint(this.scrubVector(), label);
    this.index.markDelete(label);
    this.scrubbed.add(label);
    if (!wasDeleted) this.deleted += 1;
  }

  /** What a deleted point's vector becomes: the same for every point, close to no real text. */
  private scrubVector(): number[] {
    // Alternating signs: its cosine with an embedding is the embedding's alternating sum over
    // its own length, near 0 for real text (unlike a basis vector, which some text leans on).
    const value = 1 / Math.sqrt(this.dimension);
    return Array.from({ length: this.dimension }, (_, index) => (index % 2 === 0 ? value : -value));
  }

  search(vector: Float32Array, k: number, filter?: (label: number) => boolean): VectorHit[] {
    const available = this.liveCount;
    if (available <= 0 || k <= 0) return [];
    const wanted = Math.min(k, available);
    this.index.setEf(Math.max(this.params.efSearch, wanted));
    let result: hnswlib.SearchResult;
    try {
      result = this.index.searchKnn(Array.from(vector), wanted, filter);
    } catch {
      // hnswlib refuses when fewer than k points pass the filter; ask for fewer.
      try {
        result = this.index.searchKnn(Array.from(vector), Math.max(1, Math.floor(wanted / 4)), filter);
      } catch {
        return [];
      }
    }
    return result.neighbors.map((label, position) => ({ label, similarity: 1 - result.distances[position]! }));
  }

  /** Writes the index to `file` on hnswlib's thread pool; meanwhile `add` and `remove` refuse (see `busy`). */
  async save(file: string): Promise<void> {
    while (this.writing) await this.idle();
    const writing = this.index.writeIndex(file).then(() => undefined);
    this.writing = writing;
    try {
      await writing;
    } finally {
      if (this.writing === writing) this.writing = undefined;
    }
  }
}
