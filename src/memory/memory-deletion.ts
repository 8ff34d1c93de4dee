import { itemId, parseItemId, parseSourceIds } from './search-results.js';
import { visibility } from './scope.js';
import { checkLocation, type StoreContext } from './store-context.js';
import type { ItemDescription, MemoryKind, MemoryLocation, MemoryType, SourceDropOptions, SourceDropResult } from './types.js';

/** What a memory says while it waits for the model to restate it without a removed message. */
export const MEMORY_REWRITE_MARKER = '(being rewritten: a message this memory was drawn from was removed)';

/**
 * What leaves memory: an item forgotten by id, and memories drawn from messages that are gone
 * (deleted, edited, erased), which lose those sources or, with none left, go themselves.
 */
export class MemoryDeletion {
  constructor(private readonly context: StoreContext) {}

  /**
   * Returns false when no such memory exists. With `within`, only an item that belongs to that
   * channel (or, in a DM, to that user) is forgotten.
   */
  async forget(id: string, within?: MemoryLocation): Promise<boolean> {
    const { db, indexes } = this.context;
    const rowid = parseItemId(id);
    if (rowid === undefined) return false;
    const row = (await db.prepare('SELECT rowid, index_key FROM memory_items WHERE rowid = ?').get(rowid)) as
      | { rowid: number; index_key: string }
      | undefined;
    if (!row) return false;
    // Only what belongs here: a memory another channel merely sees through a wider scope is not ours to delete.
    if (within && !(await visibility(checkLocation(within), 'channel')).keys.includes(row.index_key)) return false;
    await db.transaction(async () => {
      await db.prepare('DELETE FROM memory_items WHERE rowid = ?').run(rowid);
      await indexes.recordDeleted(row.index_key, [rowid]);
    });
    await indexes.applyDeleted(row.index_key, [rowid]);
    return true;
  }

  /**
   * Memories of a channel drawn from `messageIds`: deleted when no source remains. The others
   * lose those ids and, with `rewrite`, their text: a marker stands in for it (no vector, no
   * search words) until `finishRewrite`; without `rewrite` they are deleted as well, since what
   * they say may come from the removed message.
   */
  async dropSources(channelId: string, messageIds: readonly string[], options: SourceDropOptions = {}): Promise<SourceDropResult> {
    const { db, dialect, indexes, clock } = this.context;
    const result: SourceDropResult = { deleted: [], rewriting: [] };
    if (messageIds.length === 0) return result;
    const gone = new Set(messageIds);
    const rows = (await db
      .prepare(
        `SELECT rowid, index_key, content, memory_type, source_ids, needs_rewrite FROM memory_items
          WHERE kind = 'memory' AND channel_id = ? AND ${dialect.sharesSourceId}`,
      )
      .all(channelId, JSON.stringify([...gone]))) as Array<{
      rowid: number;
      index_key: string;
      content: string;
      memory_type: MemoryType | null;
      source_ids: string;
      needs_rewrite: number;
    }>;
    const remove = db.prepare('DELETE FROM memory_items WHERE rowid = ?');
    // The hash is the row's own, so that no saved memory is ever taken for a duplicate of a marker.
    const mark = db.prepare(
      `UPDATE memory_items SET source_ids = ?, content = ?, content_hash = ?, fts_text = '', needs_rewrite = 1, updated_at = ? WHERE rowid = ?`,
    );
    const dropVector = db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?');
    const dropOwed = db.prepare('DELETE FROM memory_vector_backlog WHERE item_rowid = ?');
    // Labels that leave their index once the transaction has committed.
    const leaving: Array<{ key: string; label: number }> = [];
    await db.transaction(async () => {
      for (const row of rows) {
        const kept = parseSourceIds(row.source_ids).filter((id) => !gone.has(id));
        const waiting = row.needs_rewrite === 1;
        const id = itemId({ rowid: row.rowid, kind: 'memory' });
        if (kept.length === 0 || !options.rewrite) {
          await remove.run(row.rowid);
          await indexes.recordDeleted(row.index_key, [row.rowid]);
          leaving.push({ key: row.index_key, label: row.rowid });
          // A marker quotes nothing: only real text needs taking out of where it was quoted.
          if (!waiting) result.deleted.push({ id, content: row.content, sourcesLeft: kept.length });
          continue;
        }
        await mark.run(JSON.stringify(kept), MEMORY_REWRITE_MARKER, `rewrite:${row.rowid}`, clock.now(), row.rowid);
        if (!waiting) {
          // Its vector encodes the old text: it leaves the index; the rewrite owes a new one.
          await dropVector.run(row.rowid);
          await dropOwed.run(row.rowid);
          await indexes.recordDeleted(row.index_key, [row.rowid]);
          leaving.push({ key: row.index_key, label: row.rowid });
        }
        result.rewriting.push({
          id,
          channelId,
          ...(row.memory_type ? { memoryType: row.memory_type } : {}),
          sourceIds: kept,
          ...(waiting ? {} : { content: row.content }),
        });
      }
    });
    for (const { key, label } of leaving) await indexes.applyDeleted(key, [label]);
    return result;
  }

  /** What an item id (`mem-12`, `msg-40`) stands for, without its neighbours; undefined if unknown. */
  async describeItem(id: string): Promise<ItemDescription | undefined> {
    const rowid = parseItemId(id);
    if (rowid === undefined) return undefined;
    const row = (await this.context.db
      .prepare('SELECT rowid, kind, channel_id, message_id, index_key, content FROM memory_items WHERE rowid = ?')
      .get(rowid)) as { rowid: number; kind: MemoryKind; channel_id: string; message_id: string | null; index_key: string; content: string } | undefined;
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
}
