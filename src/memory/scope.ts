import type { MemoryScope } from '../config/types.js';
import type { MemoryLocation, MemoryScopeKind, ViewLookup } from './types.js';

export type { ChannelView, ViewLookup, ViewRegistry } from './types.js';
import { tagToken } from './text.js';

/** The index key of a channel: its transcript and the memories saved in it share one index. */
export function channelKey(channelId: string): string {
  return `channel:${channelId}`;
}

/** The index key of a DM user: memories saved in their DMs follow the user, not the DM channel. */
export function userKey(userId: string): string {
  return `user:${userId}`;
}

/** Where a memory saved at `location` belongs. */
export function memoryHome(location: MemoryLocation): { scope: MemoryScopeKind; indexKey: string } {
  return location.dmUserId
    ? { scope: 'user', indexKey: userKey(location.dmUserId) }
    : { scope: 'channel', indexKey: channelKey(location.channelId) };
}

export const KIND_MEMORY_TAG = 'kindmemory';
/** Memories that a wider scope may show elsewhere: every memory but a DM user's own. */
export const SHARED_MEMORY_TAG = 'sharedmemory';
export const KIND_TRANSCRIPT_TAG = 'kindtranscript';

/** The FTS token of a memory type (`typefact`, ...). */
export function typeTag(memoryType: string): string {
  return `type${memoryType}`;
}

/** The FTS tokens of an item: its index key, its guild, its kind. */
export function ftsTags(options: {
  indexKey: string;
  guildId?: string | undefined;
  kind: 'memory' | 'transcript';
  memoryType?: string | undefined;
}): string {
  const tags = [tagToken('key', options.indexKey)];
  if (options.memoryType) tags.push(typeTag(options.memoryType));
  // Only memories may be seen across channels of a guild, so only they carry the guild tag.
  if (options.guildId && options.kind === 'memory') tags.push(tagToken('guild', options.guildId));
  tags.push(options.kind === 'memory' ? KIND_MEMORY_TAG : KIND_TRANSCRIPT_TAG);
  if (options.kind === 'memory' && !options.indexKey.startsWith(userKey(''))) tags.push(SHARED_MEMORY_TAG);
  return tags.join(' ');
}

/**
 * What a search at a location may see, as SQL over `memory_items` (alias `i`) and as an FTS5
 * expression over `fts_tags`. Transcripts never leave their channel; typed memories reach as far
 * as the configured scope, except what a user said in DMs, which stays theirs under any scope.
 */
export interface Visibility {
  /** Index keys searched through their HNSW index. */
  keys: string[];
  /** Memories beyond `keys` that the scope also shows (searched by exact scan). */
  wider: { kind: 'none' } | { kind: 'guild'; guildId: string } | { kind: 'global' };
  /** The SQL (alias `i`) and params selecting those wider memories, own keys excluded. */
  widerSql: string;
  widerParams: unknown[];
  sql: string;
  params: unknown[];
  ftsTags: string;
  /** The same rule in code, for rows found through the index (a last check, never a filter that cuts results). */
  allows(row: { index_key: string; kind: string; guild_id: string | null; channel_id?: string }): Promise<boolean>;
}

/** The key of a channel whose view permissions are not known (see `src/privacy/channel-views.ts`). */
const UNKNOWN_VIEW = '';

/** Under guild scope, a memory's channel must have the caller's view key (a correlated PK lookup). */
const SAME_VIEW_SQL = `COALESCE((SELECT cv.view_key FROM channel_views cv WHERE cv.channel_id = i.channel_id), '') = ?`;

/**
 * With `views`, the guild scope shows a memory only when its channel has the same view
 * permissions as the caller's: a private channel or thread never leaks into a public one.
 */
export async function visibility(location: MemoryLocation, scope: MemoryScope, views?: ViewLookup): Promise<Visibility> {
  const keys = [channelKey(location.channelId)];
  if (location.dmUserId) keys.push(userKey(location.dmUserId));
  const tagTerms = keys.map((key) => tagToken('key', key));
  const clauses = [`i.index_key IN (${keys.map(() => '?').join(', ')})`];
  const params: unknown[] = [...keys];
  let wider: Visibility['wider'] = { kind: 'none' };
  const keyList = keys.map(() => '?').join(', ');
  let widerSql = '0';
  let widerParams: unknown[] = [];
  const viewKey = await views?.keyOf(location.channelId);
  if (scope === 'global') {
    wider = { kind: 'global' };
    clauses.push(`(i.kind = 'memory' AND i.scope <> 'user')`);
    tagTerms.push(SHARED_MEMORY_TAG);
    widerSql = `(i.kind = 'memory' AND i.scope <> 'user' AND i.index_key NOT IN (${keyList}))`;
    widerParams = [...keys];
  } else if (scope === 'guild' && location.guildId && !location.dmUserId && viewKey !== UNKNOWN_VIEW) {
    // A channel whose view permissions were never recorded shares with no one until they are:
    // every such channel would otherwise share the one unknown key, private or not.
    wider = { kind: 'guild', guildId: location.guildId };
    const sameView = viewKey === undefined ? '' : ` AND ${SAME_VIEW_SQL}`;
    const viewParams = viewKey === undefined ? [] : [viewKey];
    clauses.push(`(i.kind = 'memory' AND i.guild_id = ?${sameView})`);
    params.push(location.guildId, ...viewParams);
    tagTerms.push(tagToken('guild', location.guildId));
    widerSql = `(i.kind = 'memory' AND i.guild_id = ?${sameView} AND i.index_key NOT IN (${keyList}))`;
    widerParams = [location.guildId, ...viewParams, ...keys];
  }
  const keySet = new Set(keys);
  const allows = async (row: { index_key: string; kind: string; guild_id: string | null; channel_id?: string }): Promise<boolean> => {
    if (keySet.has(row.index_key)) return true;
    if (row.kind !== 'memory') return false;
    if (wider.kind === 'global') return !row.index_key.startsWith(userKey(''));
    if (wider.kind !== 'guild' || row.guild_id !== wider.guildId) return false;
    return viewKey === undefined || (row.channel_id !== undefined && (await views!.keyOf(row.channel_id)) === viewKey);
  };
  return { keys, wider, widerSql, widerParams, sql: `(${clauses.join(' OR ')})`, params, ftsTags: tagTerms.join(' OR '), allows };
}
