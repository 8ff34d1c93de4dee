import { hasTable } from '../storage/read-only.js';
import type { SqlClient } from '../storage/sql-client.js';

/** The view key of a channel (equal keys: equal view permissions), as `ChannelViews` below keeps it. */
export interface ViewLookup {
  keyOf(channelId: string): Promise<string>;
}

/** Who can view a guild channel, as far as memory scope is concerned. */
export interface ChannelView {
  channelId: string;
  guildId: string;
  /** A thread's parent: a public thread follows its parent's key when the parent changes. */
  parentId?: string;
  /**
   * Equal keys mean equal view permissions (see `src/discord/view-key.ts`). A private thread
   * has a key of its own, so it never shares with anything.
   */
  viewKey: string;
}

/** The view keys a memory store is handed: read for the guild scope, written as Discord reports them. */
export interface ViewRegistry extends ViewLookup {
  /** Records a channel's key; resolves true when it changed. */
  record(view: ChannelView): Promise<boolean>;
}

/** Key of a channel Magpie never saw in Discord (a replayed transcript, the terminal). */
export const UNKNOWN_VIEW = '';

const PRIVATE_THREAD_PREFIX = 'private-thread:';

/**
 * The view keys of guild channels, kept in the database (`channel_views`) so that the guild
 * scope can be checked for memories saved long ago, before the scope was switched, and by the
 * CLI. Handed to the memory store by whoever opens it.
 */
export class ChannelViews implements ViewRegistry {
  private readonly cache = new Map<string, string>();

  constructor(private readonly db: SqlClient) {}

  /** Records a channel's key; resolves true when it changed. Public threads of it follow. */
  async record(view: ChannelView): Promise<boolean> {
    if ((await this.keyOf(view.channelId)) === view.viewKey && this.cache.has(view.channelId)) return false;
    const now = Date.now();
    await this.db
      .prepare(
        `INSERT INTO channel_views (channel_id, guild_id, parent_id, view_key, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, parent_id = excluded.parent_id,
           view_key = excluded.view_key, updated_at = excluded.updated_at`,
      )
      .run(view.channelId, view.guildId, view.parentId ?? null, view.viewKey, now);
    this.cache.set(view.channelId, view.viewKey);
    await this.db
      .prepare(`UPDATE channel_views SET view_key = ?, updated_at = ? WHERE parent_id = ? AND view_key NOT LIKE '${PRIVATE_THREAD_PREFIX}%'`)
      .run(view.viewKey, now, view.channelId);
    const children = (await this.db.prepare('SELECT channel_id FROM channel_views WHERE parent_id = ?').all(view.channelId)) as Array<{
      channel_id: string;
    }>;
    for (const row of children) this.cache.delete(row.channel_id);
    return true;
  }

  async keyOf(channelId: string): Promise<string> {
    const cached = this.cache.get(channelId);
    if (cached !== undefined) return cached;
    const row = (await this.db.prepare('SELECT view_key FROM channel_views WHERE channel_id = ?').get(channelId)) as { view_key: string } | undefined;
    const key = row?.view_key ?? UNKNOWN_VIEW;
    if (row) this.cache.set(channelId, key);
    return key;
  }
}

/** The view keys of a database, to hand to its memory store; undefined when it predates them. */
export async function openChannelViews(db: SqlClient): Promise<ChannelViews | undefined> {
  return (await hasTable(db, 'channel_views')) ? new ChannelViews(db) : undefined;
}

export function privateThreadKey(threadId: string): string {
  return `${PRIVATE_THREAD_PREFIX}${threadId}`;
}
