import { KeyedRead } from '../storage/keyed-read.js';
import { hashContent, oweNewVector } from './item-writes.js';
import { itemId, parseItemId, parseSourceIds } from './search-results.js';
import { searchText } from './search-text.js';
import type { StoreContext } from './store-context.js';
import type { MemoryType, PendingRewrite, RewriteOutcome } from './types.js';

/**
 * The store's side of a memory rewrite: memories that `dropSources` left waiting with a marker
 * are listed, and either get their restated text (and a vector, owed like any new text) or go.
 */
export class MemoryRewriteRows {
  /** Asked once for every channel a process opens. */
  private readonly pendingRows: KeyedRead;

  constructor(private readonly context: StoreContext) {
    this.pendingRows = new KeyedRead(
      context.db,
      `SELECT rowid, memory_type, source_ids FROM memory_items WHERE channel_id = @key AND kind = 'memory' AND needs_rewrite = 1 ORDER BY rowid`,
      (left, right) => Number(left.rowid) - Number(right.rowid),
    );
  }

  async pending(channelId: string): Promise<PendingRewrite[]> {
    const rows = (await this.pendingRows.rows(channelId)) as Array<{ rowid: number; memory_type: MemoryType | null; source_ids: string }>;
    return rows.map((row) => ({
      id: itemId({ rowid: row.rowid, kind: 'memory' }),
      channelId,
      ...(row.memory_type ? { memoryType: row.memory_type } : {}),
      sourceIds: parseSourceIds(row.source_ids),
    }));
  }

  /**
   * Read and written in one transaction, so a removal that changes the memory's sources
   * meanwhile (in this process or another) wins: the rewrite is `superseded` and starts over.
   */
  async finish(id: string, outcome: RewriteOutcome): Promise<'rewritten' | 'deleted' | 'superseded' | 'gone'> {
    const { db, indexes, clock, backlog } = this.context;
    const rowid = parseItemId(id);
    if (rowid === undefined) return 'gone';
    const result = await db.transaction(async () => {
      const row = (await db.prepare(`SELECT index_key, source_ids, needs_rewrite FROM memory_items WHERE rowid = ? AND kind = 'memory'`).get(rowid)) as
        | { index_key: string; source_ids: string; needs_rewrite: number }
        | undefined;
      if (!row || row.needs_rewrite !== 1) return { status: 'gone' as const };
      if (outcome === 'delete') {
        await db.prepare('DELETE FROM memory_items WHERE rowid = ?').run(rowid);
        await indexes.recordDeleted(row.index_key, [rowid]);
        return { status: 'deleted' as const, key: row.index_key };
      }
      if (!sameIds(parseSourceIds(row.source_ids), outcome.sourceIds)) return { status: 'superseded' as const };
      await db
        .prepare('UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, needs_rewrite = 0, updated_at = ? WHERE rowid = ?')
        .run(outcome.content, hashContent(outcome.content), searchText(outcome.content), clock.now(), rowid);
      await oweNewVector(db, rowid, row.index_key);
      return { status: 'rewritten' as const };
    });
    if (result.status === 'deleted') await indexes.applyDeleted(result.key, [rowid]);
    if (result.status === 'rewritten') db.afterCommit(() => backlog.schedule());
    return result.status;
  }
}

function sameIds(left: readonly string[], right: readonly string[]): boolean {
  return left.length === right.length && left.every((id, index) => id === right[index]);
}
