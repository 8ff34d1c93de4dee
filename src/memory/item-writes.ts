import { createHash } from 'node:crypto';
import type { ScriptStep, SqlClient, SqlRunResult } from '../storage/sql-client.js';
import { vectorToBlob } from './embedder.js';
import { channelKey, ftsTags } from './scope.js';
import { searchText } from './search-text.js';
import type { TranscriptEntryInput } from './types.js';

/** The columns of one `memory_items` row as the store writes it. */
export interface ItemRowValues {
  kind: 'memory' | 'transcript';
  content: string;
  memoryType: string | null;
  importance: number | null;
  scope: string;
  indexKey: string;
  channelId: string;
  guildId: string | null;
  userId: string | null;
  messageId: string | null;
  authorId: string | null;
  authorName: string | null;
  sourceIds: string;
  contentHash: string;
  ftsText: string;
  ftsTags: string;
  createdAt: number;
  updatedAt: number;
}

const INSERT_ITEM = `INSERT OR IGNORE INTO memory_items (kind, content, memory_type, importance, scope, index_key, channel_id, guild_id,
    user_id, message_id, author_id, author_name, source_ids, content_hash, fts_text, fts_tags, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** Adds one item; `changes` is 0 when the same message was archived already. */
export function insertItem(db: SqlClient, row: ItemRowValues): Promise<SqlRunResult> {
  return db.prepare(INSERT_ITEM).run(...itemParams(row));
}

/** The values of `INSERT_ITEM` by position: named values bound from an object cost more per row. */
function itemParams(row: ItemRowValues): unknown[] {
  return [
    row.kind,
    row.content,
    row.memoryType,
    row.importance,
    row.scope,
    row.indexKey,
    row.channelId,
    row.guildId,
    row.userId,
    row.messageId,
    row.authorId,
    row.authorName,
    row.sourceIds,
    row.contentHash,
    row.ftsText,
    row.ftsTags,
    row.createdAt,
    row.updatedAt,
  ];
}

export function insertVector(db: SqlClient, rowid: number, indexKey: string, vector: Float32Array): Promise<SqlRunResult> {
  return db.prepare('INSERT INTO memory_vectors (item_rowid, index_key, vector) VALUES (?, ?, ?)').run(rowid, indexKey, vectorToBlob(vector));
}

const OWE_VECTOR = 'INSERT OR IGNORE INTO memory_vector_backlog (item_rowid, index_key) VALUES (?, ?)';

/**
 * An item whose text was just changed, inside the transaction that changed it: the vector of the
 * old text goes and a new one is owed, so no search meets the old vector meanwhile (search scans
 * owed items exactly, and leaves out what a vector index still holds of them). The backlog makes
 * the new one in the background.
 */
export async function oweNewVector(db: SqlClient, rowid: number, indexKey: string): Promise<void> {
  await db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?').run(rowid);
  await db.prepare(OWE_VECTOR).run(rowid, indexKey);
}

/** A changed item gets a new vector row, so its new `seq` puts it in the not-yet-indexed tail. */
export async function replaceVector(db: SqlClient, rowid: number, indexKey: string, vector: Float32Array): Promise<void> {
  await db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?').run(rowid);
  await insertVector(db, rowid, indexKey, vector);
}

/**
 * Transcript rows one statement each, then the backlog rows of those that were new: cheap on
 * SQLite, where each list of runs is one synchronous step (there are no round trips).
 */
export async function stageEach(db: SqlClient, rows: readonly ItemRowValues[]): Promise<void> {
  const results = await db.prepare(INSERT_ITEM).runEach(rows.map(itemParams));
  const owed = rows.flatMap((row, position) => {
    const result = results[position]!;
    return result.changes > 0 ? [[Number(result.lastInsertRowid), row.indexKey]] : [];
  });
  if (owed.length > 0) await db.prepare(OWE_VECTOR).runEach(owed);
}

/** `stageEach` as two steps of a script for SQLite's writer thread: the backlog row of each new item points at it. */
export function stageSteps(rows: readonly ItemRowValues[]): ScriptStep[] {
  return [
    { sql: INSERT_ITEM, paramLists: rows.map(itemParams) },
    { sql: OWE_VECTOR, paramLists: rows.map((row) => [row.indexKey]), afterRowidsOfPrevious: true },
  ];
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

export function hashContent(content: string): string {
  return createHash('sha1').update(content.trim().replace(/\s+/g, ' ').toLowerCase()).digest('hex');
}

/** The row of an archived message (`text` is its transcript text, speaker included). */
export function transcriptRow(entry: TranscriptEntryInput, text: string, now: number): ItemRowValues {
  const indexKey = channelKey(entry.channelId);
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
