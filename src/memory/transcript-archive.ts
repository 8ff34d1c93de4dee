import { hashContent, insertItem, insertVector, oweNewVector, stageSteps, transcriptRow, transcriptSearchText, transcriptText } from './item-writes.js';
import type { ScriptStep } from '../storage/sql-client.js';
import { channelKey } from './scope.js';
import type { StoreContext } from './store-context.js';
import type { TranscriptEntryInput } from './types.js';

/**
 * The transcript archive: every message that left the live context, searchable by full text
 * at once and by meaning once its vector is made. Edits and deletions in Discord follow it here.
 */
export class TranscriptArchive {
  constructor(
    private readonly context: StoreContext,
    /** Called when text was stored without its vector (the embedder was down). */
    private readonly owesVectors: () => void,
  ) {}

  /**
   * Transcript rows written inside the caller's open transaction on this same database: the
   * full-text row commits with the caller's history row, the vector follows from the backlog
   * (and search scans the backlog exactly meanwhile). Undefined for another database.
   */
  stager(db: unknown): ((entries: TranscriptEntryInput[]) => Promise<void>) | undefined {
    const { db: own, dialect, clock, backlog } = this.context;
    if (db !== own) return undefined;
    return async (entries) => {
      this.context.assertOpen();
      const now = clock.now();
      const rows = entries.map((entry) => transcriptRow(entry, transcriptText(entry.authorName, entry.content), now));
      await dialect.stageTranscripts(own, rows, now);
      // Not before the caller's commit: a drain that read the backlog first would miss these
      // rows (on PostgreSQL its read does not wait for the transaction) and end.
      own.afterCommit(() => backlog.schedule());
    };
  }

  /** `stager`'s rows as script steps for SQLite's writer thread (see `MemoryStore.transcriptScript`). */
  scriptStager(db: unknown): ((entries: TranscriptEntryInput[]) => { steps: ScriptStep[]; committed: () => void }) | undefined {
    const { db: own, clock, backlog } = this.context;
    if (db !== own || !own.scriptOffThread) return undefined;
    return (entries) => {
      this.context.assertOpen();
      const now = clock.now();
      const rows = entries.map((entry) => transcriptRow(entry, transcriptText(entry.authorName, entry.content), now));
      return { steps: stageSteps(rows), committed: () => backlog.schedule() };
    };
  }

  async archive(entries: TranscriptEntryInput[]): Promise<void> {
    if (entries.length === 0) return;
    const { db, embedder, indexes, clock } = this.context;
    const exists = db.prepare(`SELECT 1 FROM memory_items WHERE channel_id = ? AND message_id = ? AND kind = 'transcript'`);
    const fresh: TranscriptEntryInput[] = [];
    for (const entry of entries) if (!(await exists.get(entry.channelId, entry.messageId))) fresh.push(entry);
    if (fresh.length === 0) return;
    const texts = fresh.map((entry) => transcriptText(entry.authorName, entry.content));
    let vectors: Float32Array[] | undefined;
    let embedFailure: unknown;
    try {
      vectors = await embedder.embed(texts);
    } catch (error) {
      // The embedder is down: the text is stored all the same, so full-text search finds it
      // now; its vector follows when the embedder is back (the backfill, in the background).
      embedFailure = error;
    }
    this.context.assertOpen();
    const now = clock.now();
    const keys = new Set<string>();
    await db.transaction(async () => {
      for (const [position, entry] of fresh.entries()) {
        const row = transcriptRow(entry, texts[position]!, now);
        const info = await insertItem(db, row);
        // Ignored: the same message arrived twice in one batch.
        if (info.changes === 0 || !vectors) continue;
        await insertVector(db, Number(info.lastInsertRowid), row.indexKey, vectors[position]!);
        keys.add(row.indexKey);
      }
    });
    for (const key of keys) indexes.noteInserted(key);
    if (embedFailure !== undefined) {
      this.owesVectors();
      // Reported all the same: the caller's log shows the outage (and a retry finds the text stored).
      throw embedFailure;
    }
  }

  /**
   * Messages edited in Discord (or the bot's replies that lost a quote): their archived text
   * changes and, in the same transaction, the vector of the old text goes and a new one is owed.
   * From the commit on, a search meets only the new text (scanned exactly until the backlog has
   * made its vector), and the old words find nothing; nor does an edit wait for the embedder, so
   * words taken out leave at once.
   */
  async update(channelId: string, changes: ReadonlyArray<{ messageId: string; content: string }>): Promise<void> {
    const { db, clock, backlog, indexes } = this.context;
    this.context.assertOpen();
    if (changes.length === 0) return;
    const find = db.prepare(`SELECT rowid, author_name, index_key FROM memory_items WHERE channel_id = ? AND message_id = ? AND kind = 'transcript'`);
    const change = db.prepare(`UPDATE memory_items SET content = ?, content_hash = ?, fts_text = ?, updated_at = ? WHERE rowid = ?`);
    const changed = await db.transaction(async () => {
      const leaving = new Map<string, number[]>();
      for (const { messageId, content } of changes) {
        const row = (await find.get(channelId, messageId)) as { rowid: number; author_name: string | null; index_key: string } | undefined;
        if (!row) continue;
        const text = transcriptText(row.author_name ?? '', content);
        const info = await change.run(text, hashContent(text), transcriptSearchText(row.author_name ?? '', content), clock.now(), row.rowid);
        if (info.changes === 0) continue;
        await oweNewVector(db, row.rowid, row.index_key);
        // The old vector encodes the words taken out (an edit, or a reply's quote of a deleted
        // message): it leaves the index files as a deleted item's does, not at their next save.
        await indexes.recordDeleted(row.index_key, [row.rowid]);
        const labels = leaving.get(row.index_key) ?? [];
        labels.push(row.rowid);
        leaving.set(row.index_key, labels);
      }
      return leaving;
    });
    if (changed.size === 0) return;
    db.afterCommit(() => backlog.schedule());
    for (const [key, labels] of changed) await indexes.applyDeleted(key, labels);
  }

  /** Messages deleted in Discord leave the archive and every index. */
  async delete(channelId: string, messageIds: string[]): Promise<void> {
    if (messageIds.length === 0) return;
    const { db, indexes } = this.context;
    const select = db.prepare(`SELECT rowid FROM memory_items WHERE channel_id = ? AND message_id = ? AND kind = 'transcript'`);
    const remove = db.prepare('DELETE FROM memory_items WHERE rowid = ?');
    const key = channelKey(channelId);
    const labels = await db.transaction(async () => {
      const removed: number[] = [];
      for (const messageId of messageIds) {
        const row = (await select.get(channelId, messageId)) as { rowid: number } | undefined;
        if (!row) continue;
        await remove.run(row.rowid);
        removed.push(row.rowid);
      }
      await indexes.recordDeleted(key, removed);
      return removed;
    });
    await indexes.applyDeleted(key, labels);
  }
}

