import type { Migration } from '../storage/database.js';

/**
 * The compaction log: what compaction did, per channel, kept for `magpie status` and
 * `magpie report` after the log lines are gone.
 *
 * One row per compaction event (`kind` = the event type), per usage sample (`usage`: one each
 * time a channel's usage crosses into another whole percent of its window) and per change of a
 * channel's compaction settings (`settings`). `position` is the number of entries the channel's
 * history held at that moment (the report's x axis); `at` is the runtime clock's time (the
 * transcript's own time in a replay). `data` holds the event's ids and numbers as JSON, never
 * message content.
 */
export const COMPACTION_LOG_MIGRATIONS: readonly Migration[] = [
  {
    name: 'compaction-log-001-init',
    up(db) {
      db.exec(`
        CREATE TABLE compaction_log (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          channel_id TEXT NOT NULL,
          at INTEGER NOT NULL,
          kind TEXT NOT NULL,
          tier TEXT,
          position INTEGER NOT NULL,
          usage REAL,
          data TEXT NOT NULL
        );
        CREATE INDEX compaction_log_channel ON compaction_log (channel_id, id);
        CREATE INDEX compaction_log_at ON compaction_log (at);
      `);
    },
  },
];
