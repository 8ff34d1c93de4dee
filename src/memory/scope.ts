import type { MemoryScope } from '../config/types.js';
import type { MemoryLocation, MemoryScopeKind } from './types.js';
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
  sql: string;
  params: unknown[];
  ftsTags: string;
  /** The same rule in code, for rows found through the index (a last check, never a filter that cuts results). */
  allows(row: { index_key: string; kind: string; guild_id: string | null }): boolean;
}

export function visibility(location: MemoryLocation, scope: MemoryScope): Visibility {
  const keys = [channelKey(location.channelId)];
  if (location.dmUserId) keys.push(userKey(location.dmUserId));
  const tagTerms = keys.map((key) => tagToken('key', key));
  const clauses = [`i.index_key IN (${keys.map(() => '?').join(', ')})`];
  const params: unknown[] = [...keys];
  let wider: Visibility['wider'] = { kind: 'none' };
  if (scope === 'global') {
    wider = { kind: 'global' };
    clauses.push(`(i.kind = 'memory' AND i.scope <> 'user')`);
    tagTerms.push(SHARED_MEMORY_TAG);
  } else if (scope === 'guild' && location.guildId && !location.dmUserId) {
    wider = { kind: 'guild', guildId: location.guildId };
    clauses.push(`(i.kind = 'memory' AND i.guild_id = ?)`);
    params.push(location.guildId);
    tagTerms.push(tagToken('guild', location.guildId));
  }
  const keySet = new Set(keys);
  const allows = (row: { index_key: string; kind: string; guild_id: string | null }): boolean => {
    if (keySet.has(row.index_key)) return true;
    if (row.kind !== 'memory') return false;
    if (wider.kind === 'global') return !row.index_key.startsWith(userKey(''));
    return wider.kind === 'guild' && row.guild_id === wider.guildId;
  };
  return { keys, wider, sql: `(${clauses.join(' OR ')})`, params, ftsTags: tagTerms.join(' OR '), allows };
}
