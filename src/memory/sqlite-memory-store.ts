import { hasTable } from '../storage/read-only.js';
import { createHash } from 'node:crypto';
import { systemClock, type Clock } from '../common/clock.js';
import { InputError } from '../common/errors.js';
import type { MemoryScope } from '../config/types.js';
import type { SqlDatabase } from '../storage/database.js';
import { isPostgres } from '../storage/sql-database.js';
import { blobToVector, dot, vectorToBlob, type Embedder } from './embedder.js';
import { searchText } from './search-text.js';
import { HybridSearch, itemId, parseItemId, parseSourceIds, type SearchTuning } from './hybrid-search.js';
import type { VectorIndexManager } from './index-manager.js';
import { channelKey, ftsTags, memoryHome, visibility } from './scope.js';
import { ChannelViews, type ChannelView } from '../privacy/channel-views.js';
import { quoteIndex, redactQuotes } from '../privacy/quoted-spans.js';
import { DELETED_NOTE } from '../privacy/redact.js';
import { VectorBacklog } from './vector-backlog.js';
import type { EventStream } from '../common/events.js';
import type {
  MemoryKind,
  MemoryLocation,
  MemoryRecord,
  MemoryScopeKind,
  MemoryStats,
  MemoryStore,
  MemoryType,
  SaveMemoryInput,
  SaveMemoryResult,
  SearchQuery,
  SearchResult,
  SourceDropResult,
  ItemDescription,
  TranscriptEntryInput,
} from './types.js';
import {
  checkContent,
  checkImportance,
  checkLimit,
  checkMemoryType,
  checkQuery,
  DEFAULT_IMPORTANCE,
  DEFAULT_SEARCH_LIMIT,
} from './validation.js';

/** Cosine at or above which a new memory of the same type and scope updates an existing one. */
export const NEAR_DUPLICATE_SIMILARITY = 0.9;

export interface SqliteMemoryStoreOptions {
  db: SqlDatabase;
  embedder: Embedder;
  indexes: VectorIndexManager;
  scope: MemoryScope;
  tuning: SearchTuning;
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

interface RecordRow {
  rowid: number;
  kind: MemoryKind;
  content: string;
  memory_type: MemoryType | null;
  importance: number | null;
  scope: MemoryScopeKind;
  index_key: string;
  channel_id: string;
  guild_id: string | null;
  message_id: string | null;
  source_ids: string;
  created_at: number;
  updated_at: number;
}

/**
 * The memory store over the shared database (SQLite or PostgreSQL): typed memories and
 * transcript entries in `memory_items`, searchable by full text (FTS5 kept by triggers, or a
 * generated tsvector column), one vector per item in `memory_vectors`, and HNSW indexes derived
 * from those vectors in the data dir.
 */
export class SqliteMemoryStore implements MemoryStore {
  private readonly db: SqlDatabase;
  private readonly embedder: Embedder;
  private readonly indexes: VectorIndexManager;
  private readonly clock: Clock;
  private readonly searcher: HybridSearch;
  private readonly insertItem;
  private readonly insertVector;
  private readonly insertBacklog;
  private readonly transcriptExists;
  private readonly backlog: VectorBacklog;
  private closed = false;
  /** View keys of guild channels (guild scope follows Discord's view permissions). */
  private readonly views: ChannelViews | undefined;
  private readonly deletedIds: { get(...params: unknown[]): unknown } | undefined;
  private backfillTimer: NodeJS.Timeout | undefined;
  private backfilling: Promise<void> | undefined;

  constructor(private readonly options: SqliteMemoryStoreOptions) {
    this.db = options.db;
    this.views = hasTable(options.db, 'channel_views') ? new ChannelViews(options.db) : undefined;
    this.deletedIds = hasTable(options.db, 'deleted_messages')
      ? options.db.prepare('SELECT 1 FROM deleted_messages WHERE channel_id = ? AND message_id = ?')
      : undefined;
    this.embedder = options.embedder;
    this.indexes = options.indexes;
    this.clock = options.clock ?? systemClock;
    this.searcher = new HybridSearch(this.db, this.indexes, options.tuning);
    this.insertItem = this.db.prepare(
      `INSERT OR IGNORE INTO memory_items (kind, content, memory_type, importance, scope, index_key, channel_id, guild_id,
         user_id, message_id, author_id, author_name, source_ids, content_hash, fts_text, fts_tags, created_at, updated_at)
       VALUES (@kind, @content, @memoryType, @importance, @scope, @indexKey, @channelId, @guildId,
         @userId, @messageId, @authorId, @authorName, @sourceIds, @contentHash, @ftsText, @ftsTags, @createdAt, @updatedAt)`,
    );
    this.insertVector = this.db.prepare('INSERT INTO memory_vectors (item_rowid, index_key, vector) VALUES (?, ?, ?)');
    this.insertBacklog = this.db.prepare('INSERT OR IGNORE INTO memory_vector_backlog (item_rowid, index_key) VALUES (?, ?)');
    this.transcriptExists = this.db.prepare(
      `SELECT 1 FROM memory_items WHERE channel_id = ? AND message_id = ? AND kind = 'transcript'`,
    );
    this.backlog = new VectorBacklog({
      db: this.db,
      embedder: this.embedder,
      indexes: this.indexes,
      ...(options.events ? { events: options.events } : {}),
      ...(options.vectorDelayMs !== undefined ? { delayMs: options.vectorDelayMs } : {}),
    });
    // Vectors a previous run left owed (a crash, a shutdown cut short) are made now; a reader
    // leaves them to the writer and scans them at search time.
    if (!options.readOnly && this.backlog.size() > 0) this.backlog.schedule();
  }

  /**
   * Transcript rows written inside the caller's open transaction on this same database: the
   * full-text row commits with the caller's history row, the vector follows from the backlog
   * (and search scans the backlog exactly meanwhile). Undefined for another database.
   */
  transcriptStager(db: unknown): ((entries: TranscriptEntryInput[]) => void) | undefined {
    if (db !== this.db) return undefined;
    return (entries) => {
      this.assertOpen();
      const now = this.clock.now();
      if (isPostgres(this.db) && entries.length > 1) {
        this.stageMany(entries, now);
        this.backlog.schedule();
        return;
      }
      for (const entry of entries) {
        const indexKey = channelKey(entry.channelId);
        const text = transcriptText(entry.authorName, entry.content);
        const info = this.insertItem.run(this.transcriptRow(entry, text, indexKey, now));
        if (info.changes > 0) this.insertBacklog.run(Number(info.lastInsertRowid), indexKey);
      }
      this.backlog.schedule();
    };
  }

  /** A group's transcript rows and their backlog rows in two statements (PostgreSQL: a round trip each). */
  private stageMany(entries: TranscriptEntryInput[], now: number): void {
    const rows = entries.map((entry) => {
      const indexKey = channelKey(entry.channelId);
      return this.transcriptRow(entry, transcriptText(entry.authorName, entry.content), indexKey, now) as Record<string, string | number | null>;
    });
    const column = (name: string): unknown[] => rows.map((row) => row[name] ?? null);
    const inserted = this.db
      .prepare(
        `INSERT INTO memory_items (kind, content, scope, index_key, channel_id, guild_id, user_id, message_id, author_id,
           author_name, source_ids, content_hash, fts_text, fts_tags, created_at, updated_at)
         SELECT 'transcript', content, 'channel', index_key, channel_id, guild_id, user_id, message_id, author_id,
           author_name, '[]', content_hash, fts_text, fts_tags, created_at, @now
           FROM unnest(@content::text[], @indexKey::text[], @channelId::text[], @guildId::text[], @userId::text[],
             @messageId::text[], @authorId::text[], @authorName::text[], @contentHash::text[], @ftsText::text[], @ftsTags::text[],
             @createdAt::bigint[])
             AS staged (content, index_key, channel_id, guild_id, user_id, message_id, author_id, author_name, content_hash,
               fts_text, fts_tags, created_at)
         ON CONFLICT DO NOTHING
         RETURNING rowid, index_key`,
      )
      .all({
        now,
        ...Object.fromEntries(
          ['content', 'indexKey', 'channelId', 'guildId', 'userId', 'messageId', 'authorId', 'authorName', 'contentHash', 'ftsText', 'ftsTags', 'createdAt'].map(
            (name) => [name, column(name)],
          ),
        ),
      }) as Array<{ rowid: number; index_key: string }>;
    if (inserted.length === 0) return;
    this.db
      .prepare(
        `INSERT INTO memory_vector_backlog (item_rowid, index_key)
         SELECT * FROM unnest(@rowids::bigint[], @indexKeys::text[]) ON CONFLICT DO NOTHING`,
      )
      .run({ rowids: inserted.map((row) => row.rowid), indexKeys: inserted.map((row) => row.index_key) });
  }

  async save(input: SaveMemoryInput): Promise<SaveMemoryResult> {
    const content = checkContent(input.content);
    const memoryType = checkMemoryType(input.memoryType);
    const importance = input.importance === undefined ? undefined : checkImportance(input.importance);
    const sourceIds = (input.sourceIds ?? []).filter((id) => typeof id === 'string' && id.length > 0);
    const location = checkLocation(input.location);
    const home = memoryHome(location);
    const contentHash = hashContent(content);
    const [vector] = await this.embedder.embed([content]);
    this.assertOpen();
    const now = this.clock.now();

    // Checked and written in one synchronous transaction, after the (possibly slow) embedding,
    // so two concurrent saves of the same text cannot both add it.
    const result = this.db.transaction((): SaveMemoryResult => {
      // A message deleted while the memory was being drawn from it (a worker's snapshot) is no source.
      if (this.deletedIds && sourceIds.length > 0) {
        const kept = sourceIds.filter((id) => this.deletedIds!.get(location.channelId, id) === undefined);
        if (kept.length === 0) throw new InputError('the messages this memory is drawn from were deleted; it was not saved');
        sourceIds.splice(0, sourceIds.length, ...kept);
      }
      const exact = this.db
        .prepare(`SELECT rowid FROM memory_items WHERE index_key = ? AND kind = 'memory' AND content_hash = ?`)
        .get(home.indexKey, contentHash) as { rowid: number } | undefined;
      if (exact) return { id: itemId({ rowid: exact.rowid, kind: 'memory' }), status: 'updated' };

      const near = this.nearestMemory(home.indexKey, memoryType, vector!, content);
      if (near) {
        const merged = [...new Set([...parseSourceIds(near.sourceIds), ...sourceIds])];
        this.db
          .prepare(
            `UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, importance = ?, source_ids = ?, updated_at = ?
              WHERE rowid = ?`,
          )
          .run(content, contentHash, searchText(content), importance ?? near.importance, JSON.stringify(merged), now, near.rowid);
        this.replaceVector(near.rowid, home.indexKey, vector!);
        return { id: itemId({ rowid: near.rowid, kind: 'memory' }), status: 'updated' };
      }

      const info = this.insertItem.run({
        kind: 'memory',
        content,
        memoryType,
        importance: importance ?? DEFAULT_IMPORTANCE[memoryType],
        scope: home.scope,
        indexKey: home.indexKey,
        channelId: location.channelId,
        guildId: location.guildId ?? null,
        userId: location.dmUserId ?? null,
        messageId: null,
        authorId: null,
        authorName: null,
        sourceIds: JSON.stringify(sourceIds),
        contentHash,
        ftsText: searchText(content),
        ftsTags: ftsTags({ indexKey: home.indexKey, guildId: location.guildId, kind: 'memory', memoryType }),
        createdAt: now,
        updatedAt: now,
      });
      const rowid = Number(info.lastInsertRowid);
      this.insertVector.run(rowid, home.indexKey, vectorToBlob(vector!));
      return { id: itemId({ rowid, kind: 'memory' }), status: 'saved' };
    })();
    this.indexes.noteInserted(home.indexKey);
    return result;
  }

  async archiveTranscript(entries: TranscriptEntryInput[]): Promise<void> {
    if (entries.length === 0) return;
    const fresh = entries.filter((entry) => !this.transcriptExists.get(entry.channelId, entry.messageId));
    if (fresh.length === 0) return;
    const texts = fresh.map((entry) => transcriptText(entry.authorName, entry.content));
    let vectors: Float32Array[] | undefined;
    let embedFailure: unknown;
    try {
      vectors = await this.embedder.embed(texts);
    } catch (error) {
      // The embedder is down: the text is stored all the same, so full-text search finds it
      // now; its vector follows when the embedder is back (`backfillVectors`, in the background).
      embedFailure = error;
    }
    this.assertOpen();
    const now = this.clock.now();
    const keys = new Set<string>();
    this.db.transaction(() => {
      fresh.forEach((entry, position) => {
        const indexKey = channelKey(entry.channelId);
        const info = this.insertItem.run(this.transcriptRow(entry, texts[position]!, indexKey, now));
        // Ignored: the same message arrived twice in one batch.
        if (info.changes === 0 || !vectors) return;
        this.insertVector.run(Number(info.lastInsertRowid), indexKey, vectorToBlob(vectors[position]!));
        keys.add(indexKey);
      });
    })();
    for (const key of keys) this.indexes.noteInserted(key);
    if (embedFailure !== undefined) {
      this.scheduleBackfill();
      // Reported all the same: the caller's log shows the outage (and a retry finds the text stored).
      throw embedFailure;
    }
  }

  /**
   * Embeds items stored without a vector (written while the embedder was down), at most `limit`
   * of them. Returns how many got one; rejects when the embedder still fails.
   */
  async backfillVectors(limit = 256): Promise<number> {
    const rows = this.db
      .prepare(
        `SELECT i.rowid, i.index_key, i.content FROM memory_items i
          WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.item_rowid = i.rowid) ORDER BY i.rowid LIMIT ?`,
      )
      .all(limit) as Array<{ rowid: number; index_key: string; content: string }>;
    if (rows.length === 0) return 0;
    const vectors = await this.embedder.embed(rows.map((row) => row.content));
    this.assertOpen();
    const keys = new Set<string>();
    const exists = this.db.prepare('SELECT 1 FROM memory_items WHERE rowid = ? AND content = ?');
    this.db.transaction(() => {
      rows.forEach((row, position) => {
        // Deleted or edited meanwhile: the edit brought its own vector, a deletion needs none.
        if (!exists.get(row.rowid, row.content)) return;
        this.db.prepare('INSERT OR IGNORE INTO memory_vectors (item_rowid, index_key, vector) VALUES (?, ?, ?)').run(row.rowid, row.index_key, vectorToBlob(vectors[position]!));
        // Owed by the ingest backlog too: settled now.
        this.db.prepare('DELETE FROM memory_vector_backlog WHERE item_rowid = ?').run(row.rowid);
        keys.add(row.index_key);
      });
    })();
    for (const key of keys) this.indexes.noteInserted(key);
    return rows.length;
  }

  /** Items without a vector (the embedder was down when they were stored). */
  missingVectors(): number {
    return (
      this.db
        .prepare('SELECT COUNT(*) AS count FROM memory_items i WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.item_rowid = i.rowid)')
        .get() as { count: number }
    ).count;
  }

  /** Starts the background backfill (idempotent); it stops once every item has a vector. */
  scheduleBackfill(): void {
    if (this.backfillTimer || this.closed) return;
    this.backfillTimer = setInterval(() => {
      if (this.backfilling) return;
      this.backfilling = this.backfillVectors()
        .then((done) => {
          if (done === 0) this.stopBackfill();
        })
        .catch(() => {
          // Still down: the next tick tries again.
        })
        .finally(() => {
          this.backfilling = undefined;
        });
    }, this.options.backfillIntervalMs ?? 30_000);
    this.backfillTimer.unref();
  }

  private stopBackfill(): void {
    if (this.backfillTimer) clearInterval(this.backfillTimer);
    this.backfillTimer = undefined;
  }

  async updateTranscript(channelId: string, messageId: string, content: string): Promise<void> {
    const row = this.db
      .prepare(`SELECT rowid, author_name FROM memory_items WHERE channel_id = ? AND message_id = ? AND kind = 'transcript'`)
      .get(channelId, messageId) as { rowid: number; author_name: string | null } | undefined;
    if (!row) return;
    const text = transcriptText(row.author_name ?? '', content);
    const owed = this.db.prepare('SELECT 1 FROM memory_vector_backlog WHERE item_rowid = ?').get(row.rowid);
    if (owed) {
      // Its vector is still owed: the backlog embeds whatever text the row holds when it gets there.
      this.db
        .prepare(`UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, updated_at = ? WHERE rowid = ?`)
        .run(text, hashContent(text), transcriptSearchText(row.author_name ?? '', content), this.clock.now(), row.rowid);
      this.backlog.schedule();
      return;
    }
    const [vector] = await this.embedder.embed([text]);
    this.assertOpen();
    const indexKey = channelKey(channelId);
    this.db.transaction(() => {
      const info = this.db
        .prepare(`UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, updated_at = ? WHERE rowid = ?`)
        .run(text, hashContent(text), transcriptSearchText(row.author_name ?? '', content), this.clock.now(), row.rowid);
      if (info.changes > 0) this.replaceVector(row.rowid, indexKey, vector!);
    })();
    this.indexes.noteInserted(indexKey);
  }

  async deleteTranscript(channelId: string, messageIds: string[]): Promise<void> {
    if (messageIds.length === 0) return;
    const select = this.db.prepare(
      `SELECT rowid FROM memory_items WHERE channel_id = ? AND message_id = ? AND kind = 'transcript'`,
    );
    const remove = this.db.prepare('DELETE FROM memory_items WHERE rowid = ?');
    const labels: number[] = [];
    this.db.transaction(() => {
      for (const messageId of messageIds) {
        const row = select.get(channelId, messageId) as { rowid: number } | undefined;
        if (!row) continue;
        remove.run(row.rowid);
        labels.push(row.rowid);
      }
      this.indexes.noteDeleted(channelKey(channelId), labels);
    })();
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
      [queryVector] = await this.embedder.embed([text]);
    } catch {
      // The embedder is down: full-text search alone still finds what was said.
      queryVector = undefined;
    }
    this.assertOpen();
    const seen = visibility(location, this.options.scope, this.views);
    // Rows whose vector is still owed are compared exactly: accepted means searchable.
    const memoriesOnly = query.kind === 'memory' || memoryType !== undefined;
    const lagging = memoriesOnly || !queryVector ? [] : await this.backlog.scan(seen.keys, queryVector);
    this.assertOpen();
    return this.searcher.run({
      queryText: text,
      ...(queryVector ? { queryVector } : {}),
      visibility: seen,
      extraVectorHits: lagging,
      now: this.clock.now(),
      limit,
      ...(query.kind ? { kind: query.kind } : {}),
      ...(memoryType ? { memoryType } : {}),
    });
  }

  list(options: { location?: MemoryLocation; kind?: MemoryKind; limit?: number }): MemoryRecord[] {
    const clauses: string[] = [];
    const params: unknown[] = [];
    if (options.location) {
      const seen = visibility(checkLocation(options.location), this.options.scope, this.views);
      clauses.push(seen.sql);
      params.push(...seen.params);
    }
    if (options.kind) {
      clauses.push('i.kind = ?');
      params.push(options.kind);
    }
    const where = clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : '';
    const limit = Math.max(1, Math.min(options.limit ?? 50, 10_000));
    const rows = this.db
      .prepare(
        `SELECT i.rowid, i.kind, i.content, i.memory_type, i.importance, i.scope, i.index_key, i.channel_id, i.guild_id,
           i.message_id, i.source_ids, i.created_at, i.updated_at
         FROM memory_items i ${where} ORDER BY i.created_at DESC, i.rowid DESC LIMIT ?`,
      )
      .all(...params, limit) as RecordRow[];
    return rows.map(toRecord);
  }

  forget(id: string, within?: MemoryLocation): boolean {
    const rowid = parseItemId(id);
    if (rowid === undefined) return false;
    const row = this.db.prepare('SELECT rowid, index_key FROM memory_items WHERE rowid = ?').get(rowid) as
      | { rowid: number; index_key: string }
      | undefined;
    if (!row) return false;
    // Only what belongs here: a memory another channel merely sees through a wider scope is not ours to delete.
    if (within && !visibility(checkLocation(within), 'channel').keys.includes(row.index_key)) return false;
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM memory_items WHERE rowid = ?').run(rowid);
      this.indexes.noteDeleted(row.index_key, [rowid]);
    })();
    return true;
  }

  recordChannelView(view: ChannelView): boolean {
    return this.views?.record(view) ?? false;
  }

  dropSources(channelId: string, messageIds: readonly string[], removedTexts: readonly string[] = []): SourceDropResult {
    const result: SourceDropResult = { deleted: [], updated: 0 };
    if (messageIds.length === 0) return result;
    const gone = new Set(messageIds);
    let rescheduled = false;
    // Source ids are a JSON array of strings in a text column; each dialect reads it its own way.
    const sourced = isPostgres(this.db)
      ? `EXISTS (SELECT 1 FROM json_array_elements_text(memory_items.source_ids::json) s (value)
                  WHERE s.value IN (SELECT value FROM json_array_elements_text(?::json)))`
      : `EXISTS (SELECT 1 FROM json_each(memory_items.source_ids) s WHERE s.value IN (SELECT value FROM json_each(?)))`;
    const rows = this.db
      .prepare(`SELECT rowid, index_key, content, source_ids FROM memory_items WHERE kind = 'memory' AND channel_id = ? AND ${sourced}`)
      .all(channelId, JSON.stringify([...gone])) as Array<{ rowid: number; index_key: string; content: string; source_ids: string }>;
    const remove = this.db.prepare('DELETE FROM memory_items WHERE rowid = ?');
    const update = this.db.prepare('UPDATE memory_items SET source_ids = ? WHERE rowid = ?');
    const rewrite = this.db.prepare('UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, updated_at = ? WHERE rowid = ?');
    const dropVector = this.db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?');
    const quotes = quoteIndex(removedTexts);
    this.db.transaction(() => {
      for (const row of rows) {
        const kept = parseSourceIds(row.source_ids).filter((id) => !gone.has(id));
        if (kept.length === 0) {
          remove.run(row.rowid);
          this.indexes.noteDeleted(row.index_key, [row.rowid]);
          result.deleted.push({ id: itemId({ rowid: row.rowid, kind: 'memory' }), content: row.content });
        } else {
          update.run(JSON.stringify(kept), row.rowid);
          // What it quotes of the removed message goes; its vector (which encodes that text)
          // goes too and is owed again, embedded from what remains.
          const content = redactQuotes(row.content, quotes, DELETED_NOTE);
          if (content !== row.content) {
            rewrite.run(content, hashContent(content), searchText(content), this.clock.now(), row.rowid);
            dropVector.run(row.rowid);
            this.indexes.noteDeleted(row.index_key, [row.rowid]);
            this.insertBacklog.run(row.rowid, row.index_key);
            rescheduled = true;
          }
          result.updated += 1;
        }
      }
    })();
    if (rescheduled) this.backlog.schedule();
    return result;
  }

  describeItem(id: string): ItemDescription | undefined {
    const rowid = parseItemId(id);
    if (rowid === undefined) return undefined;
    const row = this.db
      .prepare('SELECT rowid, kind, channel_id, message_id, index_key, content FROM memory_items WHERE rowid = ?')
      .get(rowid) as { rowid: number; kind: MemoryKind; channel_id: string; message_id: string | null; index_key: string; content: string } | undefined;
    if (!row) return undefined;
    return {
      id: itemId(row),
      kind: row.kind,
      channelId: row.channel_id,
      ...(row.message_id ? { messageId: row.message_id } : {}),
      indexKey: row.index_key,
      content: row.content,
    };
  }

  stats(location?: MemoryLocation): MemoryStats {
    let where = '';
    let params: unknown[] = [];
    let keys: string[] | undefined;
    if (location) {
      const seen = visibility(checkLocation(location), this.options.scope, this.views);
      where = `WHERE ${seen.sql}`;
      params = seen.params;
      keys = seen.keys;
    }
    const rows = this.db
      .prepare(`SELECT i.kind, i.memory_type, COUNT(*) AS total FROM memory_items i ${where} GROUP BY i.kind, i.memory_type`)
      .all(...params) as Array<{ kind: MemoryKind; memory_type: MemoryType | null; total: number }>;
    const stats: MemoryStats = {
      memories: 0,
      transcriptEntries: 0,
      byType: {},
      embedder: this.embedder.name,
      dimension: this.embedder.dimension,
      indexedVectors: 0,
      pendingVectors: 0,
    };
    for (const row of rows) {
      if (row.kind === 'transcript') stats.transcriptEntries += row.total;
      else {
        stats.memories += row.total;
        if (row.memory_type) stats.byType[row.memory_type] = (stats.byType[row.memory_type] ?? 0) + row.total;
      }
    }
    const counts = this.indexes.counts(keys);
    stats.indexedVectors = counts.indexed;
    // Owed vectors (not yet embedded) are pending too, as much as those not yet in an index.
    stats.pendingVectors = counts.pending + this.backlog.size(keys);
    return stats;
  }

  releaseChannel(channelId: string): void {
    if (!this.closed) this.indexes.unload(channelKey(channelId));
  }

  /** Channels that have anything stored, most recently active first (for CLI hints). */
  channelIds(limit: number): string[] {
    const rows = this.db
      .prepare('SELECT channel_id FROM memory_items GROUP BY channel_id ORDER BY MAX(rowid) DESC LIMIT ?')
      .all(limit) as Array<{ channel_id: string }>;
    return rows.map((row) => row.channel_id);
  }

  /**
   * Loads the vector index of each channel now, so that closing the store leaves complete index
   * files behind (a replay does this, so readers beside it need not rebuild them).
   */
  warmIndexes(channelIds: readonly string[]): void {
    for (const channelId of channelIds) this.indexes.warm(channelKey(channelId));
  }

  /** Resolves when every index has caught up with SQLite (tests and benchmarks wait on it). */
  async whenIndexed(): Promise<void> {
    await this.backlog.whenDrained();
    await this.indexes.whenIdle();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.backlog.close(this.options.readOnly ? 0 : undefined);
    this.closed = true;
    this.stopBackfill();
    await this.backfilling;
    await this.indexes.close();
  }

  private transcriptRow(entry: TranscriptEntryInput, text: string, indexKey: string, now: number): Record<string, unknown> {
    return {
      kind: 'transcript',
      content: text,
      memoryType: null,
      importance: null,
      scope: 'channel',
      indexKey,
      channelId: entry.channelId,
      guildId: entry.guildId ?? null,
      userId: entry.dmUserId ?? null,
      messageId: entry.messageId,
      authorId: entry.authorId,
      authorName: entry.authorName,
      sourceIds: '[]',
      contentHash: hashContent(text),
      ftsText: transcriptSearchText(entry.authorName, entry.content),
      ftsTags: ftsTags({ indexKey, kind: 'transcript' }),
      createdAt: Number.isFinite(entry.createdAt) ? entry.createdAt : now,
      updatedAt: now,
    };
  }

  private assertOpen(): void {
    if (this.closed) throw new InputError('the memory store is closed');
  }

  /**
   * The most similar memory of the same type and scope, if it is a near-duplicate: cosine at
   * least NEAR_DUPLICATE_SIMILARITY and the same numbers (so "freeze starts December 15" and
   * "... December 20" stay two memories rather than one silently replacing the other).
   */
  private nearestMemory(
    indexKey: string,
    memoryType: MemoryType,
    vector: Float32Array,
    content: string,
  ): { rowid: number; similarity: number; importance: number; sourceIds: string } | undefined {
    const rows = this.db
      .prepare(
        `SELECT i.rowid, i.importance, i.source_ids, i.content, v.vector FROM memory_items i
         JOIN memory_vectors v ON v.item_rowid = i.rowid
         WHERE i.index_key = ? AND i.kind = 'memory' AND i.memory_type = ?`,
      )
      .all(indexKey, memoryType) as Array<{ rowid: number; importance: number; source_ids: string; content: string; vector: Buffer }>;
    const numbers = numbersIn(content);
    let best: { rowid: number; similarity: number; importance: number; sourceIds: string } | undefined;
    for (const row of rows) {
      const similarity = dot(vector, blobToVector(row.vector));
      if (similarity < NEAR_DUPLICATE_SIMILARITY || (best && similarity <= best.similarity)) continue;
      if (numbersIn(row.content) !== numbers) continue;
      best = { rowid: row.rowid, similarity, importance: row.importance, sourceIds: row.source_ids };
    }
    return best;
  }

  /** A changed item gets a new vector row, so its new `seq` puts it in the not-yet-indexed tail. */
  private replaceVector(rowid: number, indexKey: string, vector: Float32Array): void {
    this.db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?').run(rowid);
    this.insertVector.run(rowid, indexKey, vectorToBlob(vector));
  }
}


/** Transcript text carries the speaker, so a search for a name finds what that person said. */
export function transcriptText(authorName: string, content: string): string {
  return authorName ? `${authorName}: ${content}` : content;
}

/**
 * The search tokens of a message, its speaker's name included: a query naming a participant
 * ranks what they said higher (measured on LoCoMo, this does better than leaving the name out
 * and raising their messages apart).
 */
export function transcriptSearchText(authorName: string, content: string): string {
  return searchText(transcriptText(authorName, content));
}

/** The numbers of a text, sorted, as one comparable string. */
function numbersIn(text: string): string {
  return [...new Set(text.match(/\d+(?:[.,:]\d+)*/g) ?? [])].sort().join(' ');
}

function hashContent(content: string): string {
  return createHash('sha1').update(content.trim().replace(/\s+/g, ' ').toLowerCase()).digest('hex');
}

function checkLocation(location: MemoryLocation | undefined): MemoryLocation {
  if (!location || typeof location.channelId !== 'string' || location.channelId.length === 0) {
    throw new InputError('a channel id is required to read or write memory');
  }
  return location;
}

function toRecord(row: RecordRow): MemoryRecord {
  const record: MemoryRecord = {
    id: itemId(row),
    kind: row.kind,
    content: row.content,
    scope: row.scope,
    channelId: row.channel_id,
    sourceIds: row.kind === 'transcript' ? (row.message_id ? [row.message_id] : []) : parseSourceIds(row.source_ids),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.memory_type) record.memoryType = row.memory_type;
  if (row.importance !== null) record.importance = row.importance;
  if (row.guild_id) record.guildId = row.guild_id;
  return record;
}
