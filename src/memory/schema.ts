import type { Migration } from '../storage/database.js';
import type { SqlClient } from '../storage/sql-client.js';
import { memoryDialectFor } from './pick-dialect.js';
import { searchText } from './search-text.js';

/** memory-007: the message id first (see that step). */
const TRANSCRIPT_MESSAGE_ID_FIRST = `
  DROP INDEX memory_items_message;
  CREATE UNIQUE INDEX memory_items_message ON memory_items (message_id, channel_id) WHERE kind = 'transcript';
`;

/**
 * Schema of typed memories and the transcript index.
 *
 * - `memory_items` holds both kinds (typed memories and archived messages); its integer rowid is
 *   the label of the item's vector in the HNSW index of its `index_key`.
 * - `fts_text` is the content as search tokens (`searchText`: stemmed, function words out,
 *   unspaced scripts in character pairs), written by the store beside `content`, so that both
 *   backends index the very same words.
 * - `memory_fts` is an external-content FTS5 table over `fts_text` plus `fts_tags`, a column of
 *   opaque tokens (hashed index key, guild, kind) so that a search can restrict its match to one
 *   scope inside the full-text query instead of ranking every row of the database. PostgreSQL
 *   has the generated `fts` (tsvector) and `fts_length` columns instead, and filters scope on
 *   plain columns.
 * - `memory_vectors` stores one Float32 vector per item. `seq` only ever grows, so "every vector
 *   with seq above the high-water mark" is exactly what an index file has not seen yet.
 * - `memory_index_state` records, per index key, what the index file on disk holds; an index file
 *   is trusted only when it agrees with this row.
 * - `memory_index_tombstones` remembers deletions that reach an index not loaded in memory, so they
 *   can be applied when it is.
 * - `memory_items.needs_rewrite` flags a memory whose text is a marker until the model restates it
 *   without a removed message it was drawn from.
 * - `memory_vector_backlog` lists items written without their vector yet (a message is made
 *   searchable by full text in the same transaction as its history row; its vector follows in a
 *   batch). Search scans these rows exactly, so the lag is invisible to `memory_search`.
 */
export const MEMORY_MIGRATIONS: readonly Migration[] = [
  {
    name: 'memory-001-init',
    async up(db) {
      await db.exec(`
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
    // No FTS5 here: \`fts\` is a stored tsvector (English stemming, as FTS5's porter tokenizer
    // stems) under a GIN index; scope filters are plain columns. \`fts_length\` counts words as
    // FTS5 does for bm25() (runs of letters and digits, stop words and tags included).
    postgres: `
        CREATE TABLE memory_items (
          rowid BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          kind TEXT NOT NULL CHECK (kind IN ('memory', 'transcript')),
          content TEXT NOT NULL,
          memory_type TEXT,
          importance DOUBLE PRECISION,
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
          created_at BIGINT NOT NULL,
          updated_at BIGINT NOT NULL,
          fts tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
          fts_length INTEGER GENERATED ALWAYS AS
            (cardinality(regexp_split_to_array(' ' || content || ' ' || fts_tags || ' ', '[[:alnum:]]+')) - 1) STORED
        );
        CREATE UNIQUE INDEX memory_items_message ON memory_items (channel_id, message_id)
          WHERE kind = 'transcript';
        CREATE INDEX memory_items_key ON memory_items (index_key, kind, memory_type);
        CREATE INDEX memory_items_hash ON memory_items (index_key, content_hash) WHERE kind = 'memory';
        CREATE INDEX memory_items_guild ON memory_items (guild_id, kind) WHERE kind = 'memory';
        CREATE INDEX memory_items_channel_time ON memory_items (channel_id, kind, created_at, rowid);
        CREATE INDEX memory_items_fts ON memory_items USING GIN (fts);

        CREATE TABLE memory_vectors (
          seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          item_rowid BIGINT NOT NULL UNIQUE REFERENCES memory_items (rowid) ON DELETE CASCADE,
          index_key TEXT NOT NULL,
          vector BYTEA NOT NULL
        );
        CREATE INDEX memory_vectors_key ON memory_vectors (index_key, seq);

        CREATE TABLE memory_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

        CREATE TABLE memory_index_state (
          index_key TEXT PRIMARY KEY,
          high_water BIGINT NOT NULL,
          point_count BIGINT NOT NULL,
          identity TEXT NOT NULL,
          saved_at BIGINT NOT NULL
        );
        CREATE TABLE memory_index_tombstones (
          index_key TEXT NOT NULL,
          label BIGINT NOT NULL,
          PRIMARY KEY (index_key, label)
        );
      `,
  },
  {
    name: 'memory-002-vector-backlog',
    async up(db) {
      await db.exec(`
        CREATE TABLE memory_vector_backlog (
          item_rowid INTEGER PRIMARY KEY REFERENCES memory_items (rowid) ON DELETE CASCADE,
          index_key TEXT NOT NULL
        );
        CREATE INDEX memory_vector_backlog_key ON memory_vector_backlog (index_key, item_rowid);
      `);
    },
    postgres: `
        CREATE TABLE memory_vector_backlog (
          item_rowid BIGINT PRIMARY KEY REFERENCES memory_items (rowid) ON DELETE CASCADE,
          index_key TEXT NOT NULL
        );
        CREATE INDEX memory_vector_backlog_key ON memory_vector_backlog (index_key, item_rowid);
      `,
  },
  {
    // Full text indexes search tokens made by Magpie itself, the same on both backends, instead
    // of each database's own tokenizer (neither split Chinese or Japanese, and they disagreed on
    // identifiers such as BILL-4821). Every existing row gets its tokens and the index is rebuilt.
    name: 'memory-003-search-text',
    async up(db) {
      await db.exec(`
        DROP TRIGGER memory_items_fts_insert;
        DROP TRIGGER memory_items_fts_delete;
        DROP TRIGGER memory_items_fts_update;
        DROP TABLE memory_fts;
        ALTER TABLE memory_items ADD COLUMN fts_text TEXT NOT NULL DEFAULT '';
      `);
      await fillSearchText(db);
      // Tokens are already what search matches: the tokenizer only splits them at the spaces.
      // Marks are token characters, as they are part of the letter in Thai or Devanagari.
      await db.exec(`
        CREATE VIRTUAL TABLE memory_fts USING fts5(
          fts_text, fts_tags,
          content = 'memory_items', content_rowid = 'rowid',
          tokenize = "unicode61 remove_diacritics 0 categories 'L* N* Co M*'"
        );
        CREATE TRIGGER memory_items_fts_insert AFTER INSERT ON memory_items BEGIN
          INSERT INTO memory_fts (rowid, fts_text, fts_tags) VALUES (new.rowid, new.fts_text, new.fts_tags);
        END;
        CREATE TRIGGER memory_items_fts_delete AFTER DELETE ON memory_items BEGIN
          INSERT INTO memory_fts (memory_fts, rowid, fts_text, fts_tags)
            VALUES ('delete', old.rowid, old.fts_text, old.fts_tags);
        END;
        CREATE TRIGGER memory_items_fts_update AFTER UPDATE OF fts_text, fts_tags ON memory_items BEGIN
          INSERT INTO memory_fts (memory_fts, rowid, fts_text, fts_tags)
            VALUES ('delete', old.rowid, old.fts_text, old.fts_tags);
          INSERT INTO memory_fts (rowid, fts_text, fts_tags) VALUES (new.rowid, new.fts_text, new.fts_tags);
        END;
        INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');
      `);
    },
    // \`simple\` neither stems nor drops words: the tokens are indexed as they are. \`fts_length\`
    // counts the tokens and tags, as FTS5 counts a row's length for bm25().
    postgres: `
        DROP INDEX memory_items_fts;
        ALTER TABLE memory_items DROP COLUMN fts, DROP COLUMN fts_length;
        ALTER TABLE memory_items ADD COLUMN fts_text TEXT NOT NULL DEFAULT '';
        ALTER TABLE memory_items
          ADD COLUMN fts tsvector GENERATED ALWAYS AS (to_tsvector('simple', fts_text)) STORED,
          ADD COLUMN fts_length INTEGER GENERATED ALWAYS AS
            (cardinality(regexp_split_to_array(' ' || fts_text || ' ' || fts_tags || ' ', '[^ ]+')) - 1) STORED;
        CREATE INDEX memory_items_fts ON memory_items USING GIN (fts);
      `,
    postgresData: fillSearchText,
  },
  {
    // Index files are per data dir, and several processes (each with its own data dir) may share
    // one PostgreSQL schema: each directory's index state rows and tombstones are keyed by its
    // owner id (`<owner>|<index key>`), and a deletion leaves a tombstone for every owner listed
    // here, so one process's save never discards what another's files still need.
    name: 'memory-004-index-owners',
    async up(db) {
      await db.exec('CREATE TABLE memory_index_owners (owner TEXT PRIMARY KEY, registered_at INTEGER NOT NULL) WITHOUT ROWID;');
    },
    postgres: 'CREATE TABLE memory_index_owners (owner TEXT PRIMARY KEY, registered_at BIGINT NOT NULL);',
  },
  {
    // A memory drawn from a message that was deleted (or edited) and from others: its text is
    // replaced by a marker at once and it waits, flagged, for the model to restate it from the
    // messages that remain.
    name: 'memory-005-rewrites',
    async up(db) {
      await db.exec(`
        ALTER TABLE memory_items ADD COLUMN needs_rewrite INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX memory_items_rewrite ON memory_items (channel_id) WHERE needs_rewrite = 1;
      `);
    },
    postgres: `
        ALTER TABLE memory_items ADD COLUMN needs_rewrite BIGINT NOT NULL DEFAULT 0;
        CREATE INDEX memory_items_rewrite ON memory_items (channel_id) WHERE needs_rewrite = 1;
      `,
  },
  {
    // Index catch-up reads vectors by \`seq\` and remembers the highest it took. On PostgreSQL a
    // sequence number is drawn when a row is inserted, not when it commits: two transactions
    // writing vectors at once (a save beside the backlog drain, or two processes) could commit
    // out of order, and a reader that already moved past the later one's seq would never index
    // the earlier one. Transactions that write vectors take turns (a transaction-level advisory
    // lock, taken before any row of the statement), so seq order is commit order. SQLite has one
    // writer: nothing to do.
    name: 'memory-006-vector-order',
    async up() {},
    postgres: `
        CREATE FUNCTION memory_vectors_in_order() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || ':memory-vectors', 0));
          RETURN NULL;
        END $$;
        CREATE TRIGGER memory_vectors_in_order BEFORE INSERT ON memory_vectors
          FOR EACH STATEMENT EXECUTE FUNCTION memory_vectors_in_order();
      `,
  },
  {
    // As history-003: led by the message id (which grows with time), a group commit's transcript
    // rows land at the index's right edge instead of on a page per channel. It also serves the
    // lookup of an item by its platform message id alone (as `magpie memory forget` accepts).
    name: 'memory-007-message-id-first',
    async up(db) {
      await db.exec(TRANSCRIPT_MESSAGE_ID_FIRST);
    },
    postgres: TRANSCRIPT_MESSAGE_ID_FIRST,
  },
  {
    // PostgreSQL puts new rows' words in the GIN index's pending list and merges them into the
    // index once the list is past its limit (4 MB by default); until then every full-text lookup
    // and every word count reads the whole list. A 512 kB list costs a search under a millisecond
    // instead of about four (a word's count: 6.5 → 1.3 ms, median, at 100,000 rows), and ingest
    // merges more often (the raw insert rate of a store in use, 5–9% lower). SQLite: nothing to do.
    name: 'memory-008-gin-pending-list',
    async up() {},
    postgres: `ALTER INDEX memory_items_fts SET (gin_pending_list_limit = 512);`,
  },
];

/** Rows per statement while existing rows get their search tokens. */
const FILL_BATCH = 1000;

/** Writes `fts_text` for every row, a batch at a time in rowid order. */
async function fillSearchText(db: SqlClient): Promise<void> {
  const dialect = memoryDialectFor(db);
  const select = db.prepare('SELECT rowid, content FROM memory_items WHERE rowid > ? ORDER BY rowid LIMIT ?');
  let after = 0;
  for (;;) {
    const rows = (await select.all(after, FILL_BATCH)) as Array<{ rowid: number; content: string }>;
    if (rows.length === 0) return;
    await dialect.writeSearchTexts(
      db,
      rows.map((row) => row.rowid),
      rows.map((row) => searchText(row.content)),
    );
    after = rows[rows.length - 1]!.rowid;
  }
}
