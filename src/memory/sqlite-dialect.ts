import type { SqlClient } from '../storage/sql-client.js';
import { vectorToBlob } from './embedder.js';
import { sameHashes, type BacklogRow, type MemoryDialect } from './dialect.js';
import { Fts5FullText } from './fts5-full-text.js';
import { stageEach } from './item-writes.js';
import { padded } from './item-rows.js';

/** SQLite: FTS5, json_each, and one cheap statement per row (there are no round trips). */
export const sqliteMemoryDialect: MemoryDialect = {
  name: 'sqlite',

  fullText: (db) => new Fts5FullText(db),

  sharesSourceId: `EXISTS (SELECT 1 FROM json_each(memory_items.source_ids) s WHERE s.value IN (SELECT value FROM json_each(?)))`,

  // Each side is a short walk down the (channel, kind, time, rowid) index from the anchor, for a rowid list.
  neighbourhoods({ neighbourColumns, earlier, later, list, radius }) {
    const inList = list.map(() => '?').join(', ');
    return {
      sql: `SELECT a.rowid AS anchor, ${neighbourColumns} FROM memory_items a JOIN memory_items n
              ON n.rowid IN (SELECT b.rowid FROM memory_items b WHERE ${earlier}) WHERE a.rowid IN (${inList})
            UNION ALL
            SELECT a.rowid AS anchor, ${neighbourColumns} FROM memory_items a JOIN memory_items n
              ON n.rowid IN (SELECT b.rowid FROM memory_items b WHERE ${later}) WHERE a.rowid IN (${inList})`,
      params: [radius, ...list, radius, ...list],
    };
  },

  stageTranscripts: (db, rows) => stageEach(db, rows),

  async writeBacklogVectors(db: SqlClient, rows: readonly BacklogRow[], vectors: readonly Float32Array[]) {
    const keys = new Set<string>();
    let written = 0;
    if (rows.length === 0) return { written, keys };
    await db.transaction(async () => {
      const rowids = padded(rows.map((row) => row.rowid));
      const hashes = new Map(
        (
          (await db
            .prepare(
              `SELECT b.item_rowid AS rowid, i.content_hash FROM memory_vector_backlog b JOIN memory_items i ON i.rowid = b.item_rowid
                WHERE b.item_rowid IN (${rowids.map(() => '?').join(', ')})`,
            )
            .all(...rowids)) as Array<{ rowid: number; content_hash: string }>
        ).map((row) => [row.rowid, row.content_hash]),
      );
      // Deleted meanwhile (nothing to do), or edited meanwhile (the next batch embeds the new text).
      const current = rows.flatMap((row, position) => (hashes.get(row.rowid) === row.content_hash ? [{ row, vector: vectors[position]! }] : []));
      if (current.length === 0) return;
      // Each list of runs is one synchronous step: no promise per row.
      await db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?').runEach(current.map(({ row }) => [row.rowid]));
      await db
        .prepare('INSERT INTO memory_vectors (item_rowid, index_key, vector) VALUES (?, ?, ?)')
        .runEach(current.map(({ row, vector }) => [row.rowid, row.index_key, vectorToBlob(vector)]));
      await db.prepare('DELETE FROM memory_vector_backlog WHERE item_rowid = ?').runEach(current.map(({ row }) => [row.rowid]));
      for (const { row } of current) keys.add(row.index_key);
      written = current.length;
    });
    return { written, keys };
  },

  async unchangedItems(db, items) {
    if (items.length === 0) return new Set<number>();
    const rowids = padded(items.map((item) => item.rowid));
    const rows = (await db
      .prepare(`SELECT rowid, content_hash FROM memory_items WHERE rowid IN (${rowids.map(() => '?').join(', ')})`)
      .all(...rowids)) as Array<{ rowid: number; content_hash: string }>;
    return sameHashes(items, rows);
  },

  async serializeSaves() {},

  async writeSearchTexts(db, rowids, texts) {
    const update = db.prepare('UPDATE memory_items SET fts_text = ? WHERE rowid = ?');
    for (const [position, rowid] of rowids.entries()) await update.run(texts[position], rowid);
  },
};
