import type { Clock } from '../common/clock.js';
import { InputError } from '../common/errors.js';
import { checkId } from '../common/outside-text.js';
import type { MemoryScope } from '../config/types.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { MemoryDialect } from './dialect.js';
import type { Embedder } from './embedder.js';
import type { VectorIndexManager } from './index-manager.js';
import type { ViewRegistry } from './scope.js';
import type { MemoryLocation } from './types.js';
import type { VectorBacklog } from './vector-backlog.js';

/**
 * What every part of the memory store shares: the database and its dialect, the embedder, the
 * vector indexes and their backlog, the clock, and the channel views it was handed. Built once
 * by `SqlMemoryStore`; the parts (saving, the transcript archive, backfill, deletion,
 * statistics) each hold it.
 */
export interface StoreContext {
  readonly db: SqlClient;
  readonly dialect: MemoryDialect;
  readonly embedder: Embedder;
  readonly indexes: VectorIndexManager;
  readonly backlog: VectorBacklog;
  readonly clock: Clock;
  readonly scope: MemoryScope;
  /** View keys of guild channels (guild scope follows Discord's view permissions); absent: no view check. */
  readonly views: ViewRegistry | undefined;
  /** Throws once the store is closed (after an await that may have outlived it). */
  assertOpen(): void;
}

export function checkLocation(location: MemoryLocation | undefined): MemoryLocation {
  if (!location || typeof location.channelId !== 'string' || location.channelId.length === 0) {
    throw new InputError('a channel id is required to read or write memory');
  }
  // Ids are matched exactly: one with a control character is refused (PostgreSQL cannot even
  // hold U+0000), the same on both backends, rather than searched for and never found.
  checkId(location.channelId, 'channel id');
  if (location.guildId !== undefined) checkId(location.guildId, 'guild id');
  if (location.dmUserId !== undefined) checkId(location.dmUserId, 'DM user id');
  return location;
}
