import { NO_CHANGE_FEED, type ChangeFeed } from '../common/change-feed.js';
import type { StorageTarget } from '../storage/open-storage.js';
import type { SqlClient } from '../storage/sql-client.js';

/**
 * The change feed of an opened store: on PostgreSQL, LISTEN on the store's own URL and schema
 * (several processes may serve it); on SQLite none (one process per data dir). A feed that
 * cannot open closes the store (`closeStore`) and fails the start, as the store itself would.
 */
/** `command` names the listening connection in `pg_stat_activity` (`<command> changes`). */
export async function openChangeFeed(target: StorageTarget, db: SqlClient, closeStore: () => Promise<void>, command: string): Promise<ChangeFeed> {
  if (target.backend !== 'postgres') return NO_CHANGE_FEED;
  try {
    // Loaded only for a PostgreSQL store, as the pg client is (see open-storage.ts).
    const { PgChangeFeed } = await import('../storage/postgres/pg-change-feed.js');
    return await PgChangeFeed.open({ url: target.url, schema: target.schema, db, applicationName: `${command.slice(0, 50)} changes` });
  } catch (error) {
    await closeStore();
    throw error;
  }
}
