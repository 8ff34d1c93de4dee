import type { Migration } from '../storage/database.js';

/**
 * Schema of typed memories and the transcript index.
 *
 * - `memory_items` holds both kinds (typed memories and archived messages); its integer rowid is
 *   the label of the item's vector in the HNSW index of its `index_key`.
 * - `memory_fts` is an external-content FTS5 table over `content` plus `fts_tags`, a column of
 *   opaque tokens (hashed index key, guild, kind) so that a search can restrict its match to one
 *   scope inside the full-text query instead of ranking every row of the database.
 * - `memory_vectors` stores one Float32 vector per item. `seq` only ever grows, so "every vector
 *   with seq above the high-water mark" is exactly what an index file has not seen yet.
 * - `memory_index_state` records, per index key, what the index file on disk holds; an index file
 *   is trusted only when it agrees with this row.
 * - `memory_index_tombstones` remembers deletions that reach an index not loaded in memory, so they
 *   can be applied when it is.
 * - `memory_vector_backlog` lists items written without their vector yet (a message is made
 *   searchable by full text in the same transaction as its history row; its vector follows in a
 *   batch). Search scans these rows exactly, so the lag is invisible to `memory_search`.
 */
export const MEMORY_MIGRATIONS: readonly Migration[] = [
  {
    name: 'memory-001-init',
    up(db) {
      db.exec(`
        CREATE TABLE memory_items (
          rowid INTEGER PRIMARY KEY,
          kind TEXT NOT NULL CHECK (kind IN ('memory', 'transcript')),
          content TEXT NOT NULL,
          memory_type TEXT,
          importance REAL,
          scope TEXT NOT NULL,
          index_key TEXT NOT NULL,
          channel_id TEXT NOT NULL,
          guild_id TEXT,
          user_id TEXT,
          message_id TEXT,
          author_id TEXT,
          author_name TEXT,
          source_ids TEXT NOT NULL DEFAULT '[]',
          content_hash TEXT NOT NULL,
          fts_tags TEXT NOT NULL,
          created_at INTEGER NOT NULL,
          updated_at INTEGER NOT NULL
        );
        CREATE UNIQUE INDEX memory_items_message ON memory_items (channel_id, message_id)
          WHERE kind = 'transcript';
        CREATE INDEX memory_items_key ON memory_items (index_key, kind, memory_type);
        CREATE INDEX memory_items_hash ON memory_items (index_key, content_hash) WHERE kind = 'memory';
        CREATE INDEX memory_items_guild ON memory_items (guild_id, kind) WHERE kind = 'memory';
        CREATE INDEX memory_items_channel_time ON memory_items (channel_id, kind, created_at);

        CREATE VIRTUAL TABLE memory_fts USING fts5(
          content, fts_tags,
          content = 'memory_items', content_rowid = 'rowid',
          tokenize = 'porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
          INSERT INTO memory_fts (rowid, content, fts_tags) VALUES (new.rowid, new.content, new.fts_tags);
        END;
        CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
          INSERT INTO memory_fts (memory_fts, rowid, content, fts_tags)
            VALUES ('delete', old.rowid, old.content, old.fts_tags);
        END;
        CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF content, fts_tags ON memory_items BEGIN
          INSERT INTO memory_fts (memory_fts, rowid, content, fts_tags)
            VALUES ('delete', old.rowid, old.content, old.fts_tags);
          INSERT INTO memory_fts (rowid, content, fts_tags) VALUES (new.rowid, new.content, new.fts_tags);
        END;

        CREATE TABLE memory_vectors (
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          item_rowid INTEGER NOT NULL UNIQUE REFERENCES memory_items (rowid) ON DELETE CASCADE,
          index_key TEXT NOT NULL,
          vector BLOB NOT NULL
        );
        CREATE INDEX memory_vectors_key ON memory_vectors (index_key, seq);

        CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        CREATE TABLE memory_index_state (
          index_key TEXT PRIMARY KEY,
          high_water INTEGER NOT NULL,
          point_count INTEGER NOT NULL,
          identity TEXT NOT NULL,
          saved_at INTEGER NOT NULL
        );
        CREATE TABLE memory_index_tombstones (
          index_key TEXT NOT NULL,
          label INTEGER NOT NULL,
          PRIMARY KEY (index_key, label)
        ) WITHOUT ROWID;
      `);
    },
  },
  {
    name: 'memory-002-vector-backlog',
    up(db) {
      db.exec(`
        CREATE TABLE memory_vector_backlog (
          item_rowid INTEGER PRIMARY KEY REFERENCES memory_items (rowid) ON DELETE CASCADE,
          index_key TEXT NOT NULL
        );
        CREATE INDEX memory_vector_backlog_key ON memory_vector_backlog (index_key, item_rowid);
      `);
    },
  },
];
