import type { Migration } from '../storage/database.js';

/**
 * Schema for privacy: what deletes must reach, and who may see what.
 *
 * - `history_summaries.needs_rewrite` flags a summary that covered a deleted or edited message.
 *   Its text has already been replaced by a truncation marker (so the old words are gone from
 *   the file); a rewrite from the archive, without that message, turns it back into a summary.
 *   `rewrite_tokens` is what the summary cost before it became a marker: its rewrite may cost no
 *   more, so the channel's context never grows past what compaction left it.
 * - `channel_views` records, per guild channel, a key of who can view it (derived from its
 *   permission overwrites). Under guild scope a memory crosses only between channels of one key.
 * - `token_budget` is the daily token spending per parent channel (threads count with it).
 * - `deleted_messages` remembers the ids (never the text) of messages deleted in the last day,
 *   so a compaction worker that read one before the delete cannot save a memory drawn from it.
 */
export const PRIVACY_MIGRATIONS: readonly Migration[] = [
  {
    name: 'privacy-001-init',
    async up(db) {
      await db.exec(`
        ALTER TABLE history_summaries ADD COLUMN needs_rewrite INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX history_summaries_rewrite ON history_summaries (channel_id) WHERE needs_rewrite = 1;
        CREATE INDEX history_entries_author ON history_entries (author_id, channel_id);

        CREATE TABLE channel_views (
          channel_id TEXT PRIMARY KEY,
          guild_id TEXT NOT NULL,
          parent_id TEXT,
          view_key TEXT NOT NULL,
          updated_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX channel_views_key ON channel_views (guild_id, view_key);
        CREATE INDEX channel_views_parent ON channel_views (parent_id);

        CREATE TABLE token_budget (
          channel_id TEXT NOT NULL,
          day INTEGER NOT NULL,
          tokens INTEGER NOT NULL,
          PRIMARY KEY (channel_id, day)
        ) WITHOUT ROWID;

        CREATE TABLE deleted_messages (
          channel_id TEXT NOT NULL,
          message_id TEXT NOT NULL,
          deleted_at INTEGER NOT NULL,
          PRIMARY KEY (channel_id, message_id)
        ) WITHOUT ROWID;
      `);
    },
    postgres: `
        ALTER TABLE history_summaries ADD COLUMN needs_rewrite BIGINT NOT NULL DEFAULT 0;
        CREATE INDEX history_summaries_rewrite ON history_summaries (channel_id) WHERE needs_rewrite = 1;
        CREATE INDEX history_entries_author ON history_entries (author_id, channel_id);

        CREATE TABLE channel_views (
          channel_id TEXT PRIMARY KEY,
          guild_id TEXT NOT NULL,
          parent_id TEXT,
          view_key TEXT NOT NULL,
          updated_at BIGINT NOT NULL
        );
        CREATE INDEX channel_views_key ON channel_views (guild_id, view_key);
        CREATE INDEX channel_views_parent ON channel_views (parent_id);

        CREATE TABLE token_budget (
          channel_id TEXT NOT NULL,
          day BIGINT NOT NULL,
          tokens BIGINT NOT NULL,
          PRIMARY KEY (channel_id, day)
        );

        CREATE TABLE deleted_messages (
          channel_id TEXT NOT NULL,
          message_id TEXT NOT NULL,
          deleted_at BIGINT NOT NULL,
          PRIMARY KEY (channel_id, message_id)
        );
      `,
  },
  {
    // An erasure asked for while the bot runs (`magpie memory forget` beside it): the bot, which
    // holds the writer lock, picks it up, applies it, and writes back how it went.
    name: 'privacy-002-erasure-requests',
    async up(db) {
      await db.exec(`
        CREATE TABLE erasure_requests (
          id INTEGER PRIMARY KEY,
          kind TEXT NOT NULL,
          target TEXT NOT NULL,
          status TEXT NOT NULL DEFAULT 'pending',
          result TEXT,
          requested_at INTEGER NOT NULL,
          finished_at INTEGER
        );
        CREATE INDEX erasure_requests_pending ON erasure_requests (id) WHERE status = 'pending';
      `);
    },
    postgres: `
        CREATE TABLE erasure_requests (
          id BIGSERIAL PRIMARY KEY,
          kind TEXT NOT NULL,
          target TEXT NOT NULL,
          status TEXT NOT NULL DEFAULT 'pending',
          result TEXT,
          requested_at BIGINT NOT NULL,
          finished_at BIGINT
        );
        CREATE INDEX erasure_requests_pending ON erasure_requests (id) WHERE status = 'pending';
      `,
  },
  {
    // Several processes may serve one PostgreSQL schema: one of them claims a request (the
    // claim is a row keyed by the request, so a second claimer finds it taken). The trigger
    // wakes them at once (their change feed listens): `magpie memory forget` beside a running
    // bot is applied within a second without polling the table. SQLite has one process per
    // data dir and no LISTEN: the bot polls there.
    name: 'privacy-003-erasure-claims',
    async up(db) {
      await db.exec(`
        CREATE TABLE erasure_claims (
          request_id INTEGER PRIMARY KEY,
          claimed_by TEXT NOT NULL,
          claimed_at INTEGER NOT NULL
        );
      `);
    },
    postgres: `
        CREATE TABLE erasure_claims (
          request_id BIGINT PRIMARY KEY,
          claimed_by TEXT NOT NULL,
          claimed_at BIGINT NOT NULL
        );
        CREATE FUNCTION erasure_requests_wake() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify(current_schema() || '.changes', json_build_object('kind', 'erasure_requested', 'ids', json_build_array(NEW.id::text))::text);
          RETURN NEW;
        END $$;
        CREATE TRIGGER erasure_requests_wake AFTER INSERT ON erasure_requests FOR EACH ROW EXECUTE FUNCTION erasure_requests_wake();
      `,
  },
  {
    // A summary rewritten after a delete may cost what the summary cost before, never more:
    // unbounded, a rewrite of a roll-up spanning a channel's past took a window's worth.
    name: 'privacy-004-summary-rewrite-tokens',
    async up(db) {
      await db.exec('ALTER TABLE history_summaries ADD COLUMN rewrite_tokens INTEGER;');
    },
    postgres: 'ALTER TABLE history_summaries ADD COLUMN rewrite_tokens BIGINT;',
  },
];
