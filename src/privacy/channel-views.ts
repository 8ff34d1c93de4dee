import type { SqlDatabase } from '../storage/database.js';

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

/** Key of a channel Magpie never saw in Discord (a replayed transcript, the terminal). */
export const UNKNOWN_VIEW = '';

const PRIVATE_THREAD_PREFIX = 'private-thread:';

/**
 * The view keys of guild channels, kept in SQLite (`channel_views`) so that the guild scope
 * can be checked for memories saved long ago, before the scope was switched, and by the CLI.
 */
export class ChannelViews {
  private readonly cache = new Map<string, string>();
  private readonly statements;

  constructor(db: SqlDatabase) {
    this.statements = {
      read: db.prepare('SELECT view_key FROM channel_views WHERE channel_id = ?'),
      upsert: db.prepare(
        `INSERT INTO channel_views (channel_id, guild_id, parent_id, view_key, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, parent_id = excluded.parent_id,
           view_key = excluded.view_key, updated_at = excluded.updated_at`,
      ),
      followParent: db.prepare(
        `UPDATE channel_views SET view_key = ?, updated_at = ? WHERE parent_id = ? AND view_key NOT LIKE '${PRIVATE_THREAD_PREFIX}%'`,
      ),
      children: db.prepare('SELECT channel_id FROM channel_views WHERE parent_id = ?'),
    };
  }

  /** Records a channel's key; returns true when it changed. Public threads of it follow. */
  record(view: ChannelView): boolean {
    if (this.keyOf(view.channelId) === view.viewKey && this.cache.has(view.channelId)) return false;
    const now = Date.now();
    this.statements.upsert.run(view.channelId, view.guildId, view.parentId ?? null, view.viewKey, now);
    this.cache.set(view.channelId, view.viewKey);
    this.statements.followParent.run(view.viewKey, now, view.channelId);
    for (const row of this.statements.children.all(view.channelId) as Array<{ channel_id: string }>) this.cache.delete(row.channel_id);
    return true;
  }

  keyOf(channelId: string): string {
    const cached = this.cache.get(channelId);
    if (cached !== undefined) return cached;
    const row = this.statements.read.get(channelId) as { view_key: string } | undefined;
    const key = row?.view_key ?? UNKNOWN_VIEW;
    if (row) this.cache.set(channelId, key);
    return key;
  }
}

export function privateThreadKey(threadId: string): string {
  return `${PRIVATE_THREAD_PREFIX}${threadId}`;
}
