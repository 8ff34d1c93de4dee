import type { SqlClient } from '../storage/sql-client.js';

/**
 * What the channel's statements (and the worker's read of the channel's archive) spell
 * differently on SQLite and PostgreSQL. The one place in channel/ that asks which it is.
 */
export interface ChannelDialect {
  /** A condition true when `message_id` is a platform id (digits only, not empty). */
  readonly digitsOnlyMessageId: string;
  /** The operator that matches a LIKE pattern ignoring case (SQLite's LIKE does already, for ASCII). */
  readonly likeIgnoringCase: 'LIKE' | 'ILIKE';
  /**
   * Whether many history rows go in one statement: on PostgreSQL each statement is a round
   * trip; SQLite inserts them one by one, which costs it nothing more.
   */
  readonly insertsInOneStatement: boolean;
}

const SQLITE_CHANNEL_DIALECT: ChannelDialect = Object.freeze({
  digitsOnlyMessageId: `message_id <> '' AND message_id NOT GLOB '*[^0-9]*'`,
  likeIgnoringCase: 'LIKE',
  insertsInOneStatement: false,
});

const POSTGRES_CHANNEL_DIALECT: ChannelDialect = Object.freeze({
  digitsOnlyMessageId: `message_id ~ '^[0-9]+$'`,
  likeIgnoringCase: 'ILIKE',
  insertsInOneStatement: true,
});

/** The channel dialect of a client, from the dialect it declares. */
export function channelDialectFor(db: Pick<SqlClient, 'dialect'>): ChannelDialect {
  return db.dialect === 'postgres' ? POSTGRES_CHANNEL_DIALECT : SQLITE_CHANNEL_DIALECT;
}
