import type { Migration } from '../storage/database.js';

/**
 * Schema of channel history and its archive.
 *
 * `history_entries` holds every entry ever appended (the archive). Compaction and truncation
 * only ever take the oldest live entries, so the live ones are always a suffix of the history:
 * `history_channels.live_from_seq` marks where it starts, and moving it is one small write
 * whatever the number of messages it covers. `history_summaries` holds summaries and truncation
 * markers; the live ones stand at the head of the context, ordered by `from_seq`.
 * `archived = 1` records that the entry reached the memory transcript index, so a crash between
 * the two writes is repaired on the next load.
 */
export const HISTORY_MIGRATIONS: readonly Migration[] = [
  {
    name: 'history-001-init',
    up(db) {
      db.exec(`
        CREATE TABLE history_entries (
          channel_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          message_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          role TEXT NOT NULL,
          author_id TEXT NOT NULL,
          author_name TEXT NOT NULL,
          content TEXT NOT NULL,
          created_at INTEGER NOT NULL,
          tokens INTEGER NOT NULL,
          turn_id INTEGER NOT NULL,
          archived INTEGER NOT NULL DEFAULT 0,
          guild_id TEXT,
          dm_user_id TEXT,
          PRIMARY KEY (channel_id, seq)
        ) WITHOUT ROWID;
        CREATE UNIQUE INDEX history_entries_message ON history_entries (channel_id, message_id);
        CREATE INDEX history_entries_unarchived ON history_entries (channel_id, seq) WHERE archived = 0;

        CREATE TABLE history_summaries (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          channel_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          from_seq INTEGER NOT NULL,
          to_seq INTEGER NOT NULL,
          content TEXT NOT NULL,
          tokens INTEGER NOT NULL,
          created_at INTEGER NOT NULL,
          live INTEGER NOT NULL DEFAULT 1,
          summarizer TEXT
        );
        CREATE TABLE history_channels (
          channel_id TEXT PRIMARY KEY,
          live_from_seq INTEGER NOT NULL
        ) WITHOUT ROWID;

        CREATE INDEX history_summaries_live ON history_summaries (channel_id, from_seq) WHERE live = 1;
      `);
    },
  },
];
