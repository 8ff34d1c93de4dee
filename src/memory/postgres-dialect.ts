import type { SqlClient } from '../storage/sql-client.js';
import { vectorToBlob } from './embedder.js';
import { sameHashes, type BacklogRow, type MemoryDialect } from './dialect.js';
import type { ItemRowValues } from './item-writes.js';
import { stageEach } from './item-writes.js';
import { PgFullText } from './pg-full-text.js';

/** The columns a batch of transcript rows carries as arrays (`unnest`), in order. */
const STAGED_COLUMNS = ['content', 'indexKey', 'channelId', 'guildId', 'userId', 'messageId', 'authorId', 'authorName', 'contentHash', 'ftsText', 'ftsTags', 'createdAt'] as const;

/**
 * PostgreSQL: tsvector full text, json functions, LATERAL, and batches carried as arrays so
 * that a group of rows costs one statement (one round trip), not one per row.
 */
export const postgresMemoryDialect: MemoryDialect = {
  name: 'postgres',

  fullText: (db) => new PgFullText(db),

  sharesSourceId: `EXISTS (SELECT 1 FROM json_array_elements_text(memory_items.source_ids::json) s (value)
                     WHERE s.value IN (SELECT value FROM json_array_elements_text(?::json)))`,

  // Each side is a short walk down the (channel, kind, time, rowid) index, per anchor through LATERAL.
  neighbourhoods({ columns, neighbourColumns, earlier, later, list, radius }) {
    return {
      sql: `SELECT a.rowid AS anchor, ${neighbourColumns} FROM memory_items a CROSS JOIN LATERAL (
              (SELECT ${columns} FROM memory_items b WHERE ${earlier})
              UNION ALL
              (SELECT ${columns} FROM memory_items b WHERE ${later})
            ) n WHERE a.rowid IN (${list.map(() => '?').join(', ')})`,
      params: [radius, radius, ...list],
    };
  },

  async stageTranscripts(db, rows, now) {
    if (rows.length <= 1) return stageEach(db, rows);
    await stageMany(db, rows, now);
  },

  // The batch in four statements, with the same checks as SQLite's row by row; its items are
  // held unchanged first, so an edit either comes before (its row is left alone) or waits for
  // the commit (and then deletes the vector written here, owing a new one).
  async writeBacklogVectors(db: SqlClient, rows: readonly BacklogRow[], vectors: readonly Float32Array[]) {
    const added = await db.transaction(async () => {
      const unchanged = await postgresMemoryDialect.unchangedItems(
        db,
        rows.map((row) => ({ rowid: row.rowid, contentHash: row.content_hash })),
      );
      const held = rows.flatMap((row, position) => (unchanged.has(row.rowid) ? [{ row, vector: vectors[position]! }] : []));
      if (held.length === 0) return [];
      return writeHeldVectors(db, {
        rowids: held.map(({ row }) => row.rowid),
        hashes: held.map(({ row }) => row.content_hash),
        vectors: held.map(({ vector }) => vectorToBlob(vector)),
      });
    });
    return { written: added.length, keys: new Set(added.map((row) => row.index_key)) };
  },

  async unchangedItems(db, items) {
    if (items.length === 0) return new Set<number>();
    const rows = (await db
      .prepare('SELECT rowid, content_hash FROM memory_items WHERE rowid = ANY(@rowids::bigint[]) FOR SHARE SKIP LOCKED')
      .all({ rowids: items.map((item) => item.rowid) })) as Array<{ rowid: number | string; content_hash: string }>;
    return sameHashes(items, rows);
  },

  async serializeSaves(db, indexKey) {
    await db.prepare(`SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':memory-save:' || ?, 0)) AS locked`).get(indexKey);
  },

  async writeSearchTexts(db, rowids, texts) {
    await db
      .prepare(
        `UPDATE memory_items SET fts_text = t.fts_text FROM unnest(@rowids::bigint[], @texts::text[]) AS t (rowid, fts_text)
          WHERE memory_items.rowid = t.rowid`,
      )
      .run({ rowids, texts });
  },
};

/** A group's transcript rows and their backlog rows in two statements. */
async function stageMany(db: SqlClient, rows: readonly ItemRowValues[], now: number): Promise<void> {
  const column = (name: (typeof STAGED_COLUMNS)[number]): unknown[] => rows.map((row) => row[name] ?? null);
  const inserted = (await db
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
    .all({ now, ...Object.fromEntries(STAGED_COLUMNS.map((name) => [name, column(name)])) })) as Array<{ rowid: number; index_key: string }>;
  if (inserted.length === 0) return;
  await db
    .prepare(
      `INSERT INTO memory_vector_backlog (item_rowid, index_key)
       SELECT * FROM unnest(@rowids::bigint[], @indexKeys::text[]) ON CONFLICT DO NOTHING`,
    )
    .run({ rowids: inserted.map((row) => row.rowid), indexKeys: inserted.map((row) => row.index_key) });
}

/**
 * The vectors of items held unchanged (see `unchangedItems`), in three statements: the old
 * vectors go, the new ones come, the backlog rows are settled. The joins still check that each
 * row is owed and of the same text. Returns the rows written.
 */
async function writeHeldVectors(
  db: SqlClient,
  batch: { rowids: number[]; hashes: string[]; vectors: Buffer[] },
): Promise<Array<{ item_rowid: number; index_key: string }>> {
  const current = `unnest(@rowids::bigint[], @hashes::text[], @vectors::bytea[]) AS batch (item_rowid, content_hash, vector)
    JOIN memory_vector_backlog b ON b.item_rowid = batch.item_rowid
    JOIN memory_items i ON i.rowid = batch.item_rowid AND i.content_hash = batch.content_hash`;
  // The same rows, without the vectors: the DELETE need not carry half a megabyte of them.
  const currentRows = `unnest(@rowids::bigint[], @hashes::text[]) AS batch (item_rowid, content_hash)
    JOIN memory_vector_backlog b ON b.item_rowid = batch.item_rowid
    JOIN memory_items i ON i.rowid = batch.item_rowid AND i.content_hash = batch.content_hash`;
  await db
    .prepare(`DELETE FROM memory_vectors WHERE item_rowid IN (SELECT batch.item_rowid FROM ${currentRows})`)
    .run({ rowids: batch.rowids, hashes: batch.hashes });
  const inserted = (await db
    .prepare(
      `INSERT INTO memory_vectors (item_rowid, index_key, vector)
       SELECT batch.item_rowid, b.index_key, batch.vector FROM ${current} RETURNING item_rowid, index_key`,
    )
    .all(batch)) as Array<{ item_rowid: number; index_key: string }>;
  if (inserted.length > 0) {
    await db.prepare('DELETE FROM memory_vector_backlog WHERE item_rowid = ANY(@done::bigint[])').run({ done: inserted.map((row) => row.item_rowid) });
  }
  return inserted;
}
