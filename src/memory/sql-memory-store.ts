import { systemClock, type Clock } from '../common/clock.js';
import { InputError } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { MemoryScope } from '../config/types.js';
import type { ScriptStep, SqlClient } from '../storage/sql-client.js';
import type { Embedder } from './embedder.js';
import { HybridSearch, type SearchTuning } from './hybrid-search.js';
import type { VectorIndexManager } from './index-manager.js';
import { MemoryDeletion } from './memory-deletion.js';
import { MemoryRewriteRows } from './memory-rewrite-rows.js';
import { MemorySaver } from './memory-saver.js';
import { MemoryStatistics } from './memory-statistics.js';
import { memoryDialectFor } from './pick-dialect.js';
import { channelKey, visibility, type ChannelView, type ViewRegistry } from './scope.js';
import { checkLocation, type StoreContext } from './store-context.js';
import { TranscriptArchive } from './transcript-archive.js';
import type {
  ItemDescription,
  MemoryKind,
  MemoryLocation,
  MemoryRecord,
  MemoryStats,
  MemoryStore,
  PendingRewrite,
  RewriteOutcome,
  SourceDropOptions,
  SaveMemoryInput,
  SaveMemoryResult,
  SearchQuery,
  SearchResult,
  SourceDropResult,
  TranscriptEntryInput,
} from './types.js';
import { checkLimit, checkMemoryType, checkQuery, DEFAULT_SEARCH_LIMIT } from './validation.js';
import { VectorBackfill } from './vector-backfill.js';
import { VectorBacklog } from './vector-backlog.js';

export interface SqlMemoryStoreOptions {
  db: SqlClient;
  embedder: Embedder;
  indexes: VectorIndexManager;
  scope: MemoryScope;
  tuning: SearchTuning;
  /** The view keys of guild channels; without them the guild scope shares by guild alone. */
  views?: ViewRegistry;
  clock?: Clock;
  /** `memory_vectors_delayed` (embedder failing while vectors catch up) goes here. */
  events?: EventStream;
  /** How long staged transcript rows wait for company before their vectors are made. */
  vectorDelayMs?: number;
  /** A reader: owed vectors are scanned at search time but never written. */
  readOnly?: boolean;
  /** How often items stored without a vector (embedder down) are embedded again, in ms. Default 30 s. */
  backfillIntervalMs?: number;
}

/**
 * The memory store over the shared database (SQLite or PostgreSQL, through `SqlClient`): typed
 * memories and transcript entries in `memory_items`, searchable by full text (FTS5 kept by
 * triggers, or a generated tsvector column), one vector per item in `memory_vectors`, and HNSW
 * indexes derived from those vectors in the data dir. The work is split by responsibility:
 * saving and merging (`memory-saver.ts`), the transcript archive, the vector backfill, deletion
 * and statistics; what differs between the backends comes from the dialect.
 */
export class SqlMemoryStore implements MemoryStore {
  private readonly context: StoreContext;
  private readonly searcher: HybridSearch;
  private readonly backlog: VectorBacklog;
  private readonly saver: MemorySaver;
  private readonly archive: TranscriptArchive;
  private readonly backfill: VectorBackfill;
  private readonly deletion: MemoryDeletion;
  private readonly rewriteRows: MemoryRewriteRows;
  private readonly statistics: MemoryStatistics;
  private closed = false;

  constructor(private readonly options: SqlMemoryStoreOptions) {
    const dialect = memoryDialectFor(options.db);
    this.backlog = new VectorBacklog({
      db: options.db,
      dialect,
      embedder: options.embedder,
      indexes: options.indexes,
      ...(options.events ? { events: options.events } : {}),
      ...(options.vectorDelayMs !== undefined ? { delayMs: options.vectorDelayMs } : {}),
    });
    this.context = {
      db: options.db,
      dialect,
      embedder: options.embedder,
      indexes: options.indexes,
      backlog: this.backlog,
      clock: options.clock ?? systemClock,
      scope: options.scope,
      views: options.views,
      assertOpen: () => {
        if (this.closed) throw new InputError('the memory store is closed');
      },
    };
    this.searcher = new HybridSearch(options.db, dialect, options.indexes, options.tuning);
    this.saver = new MemorySaver(this.context);
    this.backfill = new VectorBackfill(this.context, options.backfillIntervalMs ?? 30_000);
    this.archive = new TranscriptArchive(this.context, () => this.backfill.schedule());
    this.deletion = new MemoryDeletion(this.context);
    this.rewriteRows = new MemoryRewriteRows(this.context);
    this.statistics = new MemoryStatistics(this.context);
  }

  /**
   * Background work a previous run left: vectors owed by the backlog (a crash, a shutdown cut
   * short) and items stored while the embedder was down. A reader leaves owed vectors to the
   * writer and scans them at search time.
   */
  async resumeBackgroundWork(): Promise<void> {
    if (!this.options.readOnly && (await this.backlog.size()) > 0) this.backlog.schedule();
    if ((await this.backfill.missing()) > 0) this.backfill.schedule();
  }

  transcriptStager(db: unknown): ((entries: TranscriptEntryInput[]) => Promise<void>) | undefined {
    return this.archive.stager(db);
  }

  transcriptScript(db: unknown): ((entries: TranscriptEntryInput[]) => { steps: ScriptStep[]; committed: () => void }) | undefined {
    return this.archive.scriptStager(db);
  }

  save(input: SaveMemoryInput): Promise<SaveMemoryResult> {
    return this.saver.save(input);
  }

  archiveTranscript(entries: TranscriptEntryInput[]): Promise<void> {
    return this.archive.archive(entries);
  }

  updateTranscript(channelId: string, changes: ReadonlyArray<{ messageId: string; content: string }>): Promise<void> {
    return this.archive.update(channelId, changes);
  }

  deleteTranscript(channelId: string, messageIds: string[]): Promise<void> {
    return this.archive.delete(channelId, messageIds);
  }

  /** Embeds up to `limit` items stored without a vector; see `VectorBackfill.run`. */
  backfillVectors(limit?: number): Promise<number> {
    return this.backfill.run(limit);
  }

  /** Items without a vector (the embedder was down when they were stored). */
  missingVectors(): Promise<number> {
    return this.backfill.missing();
  }

  /** Starts the background backfill (idempotent); it stops once every item has a vector. */
  scheduleBackfill(): void {
    if (!this.closed) this.backfill.schedule();
  }

  async search(query: SearchQuery): Promise<SearchResult[]> {
    const text = checkQuery(query.query);
    const limit = query.limit === undefined ? DEFAULT_SEARCH_LIMIT : checkLimit(query.limit);
    const memoryType = query.memoryType === undefined ? undefined : checkMemoryType(query.memoryType);
    if (query.kind !== undefined && query.kind !== 'memory' && query.kind !== 'transcript') {
      throw new InputError(`kind must be memory or transcript; got ${JSON.stringify(query.kind)}`);
    }
    const location = checkLocation(query.location);
    let queryVector: Float32Array | undefined;
    try {
      [queryVector] = await this.options.embedder.embed([text]);
    } catch {
      // The embedder is down: full-text search alone still finds what was said.
      queryVector = undefined;
    }
    this.context.assertOpen();
    const seen = await visibility(location, this.options.scope, this.options.views);
    // Rows whose vector is still owed are compared exactly: accepted means searchable (a memory
    // just rewritten too, in a search of memories alone).
    const memoriesOnly = query.kind === 'memory' || memoryType !== undefined;
    const only = memoriesOnly ? { kind: 'memory' as const, ...(memoryType ? { memoryType } : {}) } : {};
    const lagging = queryVector ? await this.backlog.scan(seen.keys, queryVector, only) : undefined;
    this.context.assertOpen();
    return this.searcher.run({
      queryText: text,
      ...(queryVector ? { queryVector } : {}),
      visibility: seen,
      ...(lagging ? { extraVectorHits: lagging.hits, owedAmong: lagging.owedAmong } : {}),
      now: this.context.clock.now(),
      channelId: location.channelId,
      limit,
      ...(query.kind ? { kind: query.kind } : {}),
      ...(memoryType ? { memoryType } : {}),
    });
  }

  list(options: { location?: MemoryLocation; kind?: MemoryKind; limit?: number }): Promise<MemoryRecord[]> {
    return this.statistics.list(options);
  }

  forget(id: string, within?: MemoryLocation): Promise<boolean> {
    return this.deletion.forget(id, within);
  }

  recordChannelView(view: ChannelView): Promise<boolean> {
    return this.options.views?.record(view) ?? Promise.resolve(false);
  }

  dropSources(channelId: string, messageIds: readonly string[], options?: SourceDropOptions): Promise<SourceDropResult> {
    return this.deletion.dropSources(channelId, messageIds, options);
  }

  finishRewrite(id: string, outcome: RewriteOutcome): Promise<'rewritten' | 'deleted' | 'superseded' | 'gone'> {
    return this.rewriteRows.finish(id, outcome);
  }

  pendingRewrites(channelId: string): Promise<PendingRewrite[]> {
    return this.rewriteRows.pending(channelId);
  }

  describeItem(id: string): Promise<ItemDescription | undefined> {
    return this.deletion.describeItem(id);
  }

  stats(location?: MemoryLocation): Promise<MemoryStats> {
    return this.statistics.stats(location);
  }

  async releaseChannel(channelId: string): Promise<void> {
    if (!this.closed) await this.options.indexes.unload(channelKey(channelId));
  }

  /** Channels that have anything stored, most recently active first (for CLI hints). */
  channelIds(limit: number): Promise<string[]> {
    return this.statistics.channelIds(limit);
  }

  /**
   * Loads the vector index of each channel now, so that closing the store leaves complete index
   * files behind (a replay does this, so readers beside it need not rebuild them).
   */
  async warmIndexes(channelIds: readonly string[]): Promise<void> {
    for (const channelId of channelIds) await this.options.indexes.warm(channelKey(channelId));
  }

  /** Resolves when every index has caught up with the database (tests and benchmarks wait on it). */
  async whenIndexed(): Promise<void> {
    // The drain is scheduled once the rows' transaction committed, which on a network store may
    // be after this is called: wait until the backlog is really empty (bounded: a drain that
    // keeps failing retries on its own timer).
    for (let round = 0; round < 200; round += 1) {
      await this.backlog.whenDrained();
      await this.options.indexes.whenIdle();
      if ((await this.backlog.size()) === 0) return;
      this.backlog.schedule();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.backlog.close(this.options.readOnly ? 0 : undefined);
    this.closed = true;
    await this.backfill.close();
    await this.options.indexes.close();
  }
}
