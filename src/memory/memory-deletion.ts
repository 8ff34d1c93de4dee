import { itemId, parseItemId, parseSourceIds } from './search-results.js';
import { hashContent, oweVector } from './item-writes.js';
import { visibility } from './scope.js';
import { searchText } from './search-text.js';
import { checkLocation, type StoreContext } from './store-context.js';
import type { ItemDescription, MemoryKind, MemoryLocation, QuoteRedactor, SourceDropResult } from './types.js';

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
   * Memories of a channel drawn from `messageIds`: deleted when no source remains, otherwise
   * they lose those ids and what `redact` takes out of their text (their vector is owed again).
   */
  async dropSources(channelId: string, messageIds: readonly string[], redact: QuoteRedactor = (content) => content): Promise<SourceDropResult> {
    const { db, dialect, indexes, clock, backlog } = this.context;
    const result: SourceDropResult = { deleted: [], updated: 0 };
    if (messageIds.length === 0) return result;
    const gone = new Set(messageIds);
    let rescheduled = false;
    const rows = (await db
      .prepare(`SELECT rowid, index_key, content, source_ids FROM memory_items WHERE kind = 'memory' AND channel_id = ? AND ${dialect.sharesSourceId}`)
      .all(channelId, JSON.stringify([...gone]))) as Array<{ rowid: number; index_key: string; content: string; source_ids: string }>;
    const remove = db.prepare('DELETE FROM memory_items WHERE rowid = ?');
    const update = db.prepare('UPDATE memory_items SET source_ids = ? WHERE rowid = ?');
    const rewrite = db.prepare('UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, updated_at = ? WHERE rowid = ?');
    const dropVector = db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?');
    // Labels that leave their index once the transaction has committed.
    const leaving: Array<{ key: string; label: number }> = [];
    await db.transaction(async () => {
      for (const row of rows) {
        const kept = parseSourceIds(row.source_ids).filter((id) => !gone.has(id));
        if (kept.length === 0) {
          await remove.run(row.rowid);
          await indexes.recordDeleted(row.index_key, [row.rowid]);
          leaving.push({ key: row.index_key, label: row.rowid });
          result.deleted.push({ id: itemId({ rowid: row.rowid, kind: 'memory' }), content: row.content });
        } else {
          await update.run(JSON.stringify(kept), row.rowid);
          // What it quotes of the removed message goes; its vector (which encodes that text)
          // goes too and is owed again, embedded from what remains.
          const content = redact(row.content);
          if (content !== row.content) {
            await rewrite.run(content, hashContent(content), searchText(content), clock.now(), row.rowid);
            await dropVector.run(row.rowid);
            await indexes.recordDeleted(row.index_key, [row.rowid]);
            leaving.push({ key: row.index_key, label: row.rowid });
            await oweVector(db, row.rowid, row.index_key);
            rescheduled = true;
          }
          result.updated += 1;
        }
      }
    });
    for (const { key, label } of leaving) await indexes.applyDeleted(key, [label]);
    if (rescheduled) backlog.schedule();
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
