import { InputError } from '../common/errors.js';
import { hasTable } from '../storage/read-only.js';
import { blobToVector, dot } from './embedder.js';
import { itemId, parseSourceIds } from './search-results.js';
import { hashContent, insertItem, insertVector, replaceVector } from './item-writes.js';
import { ftsTags, memoryHome } from './scope.js';
import { searchText } from './search-text.js';
import { checkLocation, type StoreContext } from './store-context.js';
import type { MemoryType, SaveMemoryInput, SaveMemoryResult } from './types.js';
import { checkContent, checkImportance, checkMemoryType, DEFAULT_IMPORTANCE } from './validation.js';

/** Cosine at or above which a new memory of the same type and scope updates an existing one. */
export const NEAR_DUPLICATE_SIMILARITY = 0.9;

interface NearMemory {
  rowid: number;
  similarity: number;
  importance: number;
  sourceIds: string;
}

/**
 * Saving typed memories: the same text again updates the memory it matches, and a near-duplicate
 * (same type and scope, cosine at least NEAR_DUPLICATE_SIMILARITY, the same numbers) is merged
 * into the one it nearly repeats, sources joined.
 */
export class MemorySaver {
  /** Whether `deleted_messages` exists (an older data dir may lack it); asked once. */
  private tombstones: Promise<boolean> | undefined;

  constructor(private readonly context: StoreContext) {}

  async save(input: SaveMemoryInput): Promise<SaveMemoryResult> {
    const { db, embedder, indexes, clock } = this.context;
    const content = checkContent(input.content);
    const memoryType = checkMemoryType(input.memoryType);
    const importance = input.importance === undefined ? undefined : checkImportance(input.importance);
    const sourceIds = (input.sourceIds ?? []).filter((id) => typeof id === 'string' && id.length > 0);
    const location = checkLocation(input.location);
    const home = memoryHome(location);
    const contentHash = hashContent(content);
    const [vector] = await embedder.embed([content]);
    this.context.assertOpen();
    // Asked once; a failed look is asked again next time rather than remembered.
    this.tombstones ??= hasTable(db, 'deleted_messages').catch((error: unknown) => {
      this.tombstones = undefined;
      throw error;
    });
    const checkTombstones = await this.tombstones;
    const now = clock.now();

    // Checked and written in one transaction, after the (possibly slow) embedding and with
    // nothing but this database awaited inside, so two concurrent saves of the same text cannot
    // both add it. Serial on SQLite because the transaction holds the one connection until it
    // commits; on PostgreSQL, where several processes may save into one scope at once (READ
    // COMMITTED would let both miss the other's row), by a transaction-level advisory lock on
    // the scope's index key, taken first: the second saver waits, then finds the first's row.
    const result = await db.transaction(async (): Promise<SaveMemoryResult> => {
      await this.context.dialect.serializeSaves(db, home.indexKey);
      // A message deleted while the memory was being drawn from it (a worker's snapshot) is no source.
      if (checkTombstones && sourceIds.length > 0) {
        const deleted = db.prepare('SELECT 1 FROM deleted_messages WHERE channel_id = ? AND message_id = ?');
        const kept: string[] = [];
        for (const id of sourceIds) if ((await deleted.get(location.channelId, id)) === undefined) kept.push(id);
        if (kept.length === 0) throw new InputError('the messages this memory is drawn from were deleted; it was not saved');
        sourceIds.splice(0, sourceIds.length, ...kept);
      }
      const exact = (await db
        .prepare(`SELECT rowid FROM memory_items WHERE index_key = ? AND kind = 'memory' AND content_hash = ?`)
        .get(home.indexKey, contentHash)) as { rowid: number } | undefined;
      if (exact) return { id: itemId({ rowid: exact.rowid, kind: 'memory' }), status: 'updated' };

      const near = await this.nearestMemory(home.indexKey, memoryType, vector!, content);
      if (near) {
        const merged = [...new Set([...parseSourceIds(near.sourceIds), ...sourceIds])];
        await db
          .prepare(
            `UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, importance = ?, source_ids = ?, updated_at = ?
              WHERE rowid = ?`,
          )
          .run(content, contentHash, searchText(content), importance ?? near.importance, JSON.stringify(merged), now, near.rowid);
        await replaceVector(db, near.rowid, home.indexKey, vector!);
        return { id: itemId({ rowid: near.rowid, kind: 'memory' }), status: 'updated' };
      }

      const info = await insertItem(db, {
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
      await insertVector(db, rowid, home.indexKey, vector!);
      return { id: itemId({ rowid, kind: 'memory' }), status: 'saved' };
    });
    indexes.noteInserted(home.indexKey);
    return result;
  }

  /**
   * The most similar memory of the same type and scope, if it is a near-duplicate: cosine at
   * least NEAR_DUPLICATE_SIMILARITY and the same numbers (so "freeze starts December 15" and
   * "... December 20" stay two memories rather than one silently replacing the other).
   */
  private async nearestMemory(indexKey: string, memoryType: MemoryType, vector: Float32Array, content: string): Promise<NearMemory | undefined> {
    const rows = (await this.context.db
      .prepare(
        `SELECT i.rowid, i.importance, i.source_ids, i.content, v.vector FROM memory_items i
         JOIN memory_vectors v ON v.item_rowid = i.rowid
         WHERE i.index_key = ? AND i.kind = 'memory' AND i.memory_type = ?`,
      )
      .all(indexKey, memoryType)) as Array<{ rowid: number; importance: number; source_ids: string; content: string; vector: Buffer }>;
    const numbers = numbersIn(content);
    let best: NearMemory | undefined;
    for (const row of rows) {
      const similarity = dot(vector, blobToVector(row.vector));
      if (similarity < NEAR_DUPLICATE_SIMILARITY || (best && similarity <= best.similarity)) continue;
      if (numbersIn(row.content) !== numbers) continue;
      best = { rowid: row.rowid, similarity, importance: row.importance, sourceIds: row.source_ids };
    }
    return best;
  }
}

/** The numbers of a text, sorted, as one comparable string. */
function numbersIn(text: string): string {
  return [...new Set(text.match(/\d+(?:[.,:]\d+)*/g) ?? [])].sort().join(' ');
}
