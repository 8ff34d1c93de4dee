import { hasTable } from '../storage/read-only.js';
import { KeyedRead } from '../storage/keyed-read.js';
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
  private readonly recording = new Map<string, Promise<void>>();
  private batch: Array<{ view: ChannelView; resolve(followers: string[]): void; reject(error: unknown): void }> = [];
  private readonly statements;

  constructor(private readonly db: SqlClient) {
    this.statements = {
      // Asked once for every channel a process meets: a burst of new channels shares one statement.
      viewKey: new KeyedRead(db, 'SELECT view_key FROM channel_views WHERE channel_id = @key'),
      upsert: db.prepare(
        `INSERT INTO channel_views (channel_id, guild_id, parent_id, view_key, updated_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET guild_id = excluded.guild_id, parent_id = excluded.parent_id,
           view_key = excluded.view_key, updated_at = excluded.updated_at`,
      ),
      follow: db.prepare(
        `UPDATE channel_views SET view_key = ?, updated_at = ? WHERE parent_id = ? AND view_key NOT LIKE '${PRIVATE_THREAD_PREFIX}%'
         RETURNING channel_id`,
      ),
    };
  }

  /** Records a channel's key; resolves true when it changed. Public threads of it follow. */
  record(view: ChannelView): Promise<boolean> {
    // Every message of a channel comes here: when its key is known and nothing is being written,
    // there is nothing to wait for (and no promises to chain, a few per message otherwise).
    if (view.viewKey !== UNKNOWN_VIEW && this.cache.get(view.channelId) === view.viewKey && !this.recording.has(view.channelId)) {
      return Promise.resolve(false);
    }
    // One at a time per channel: every message of a channel records its view, and the ones that
    // arrive while the first write is in flight find it done instead of writing it again.
    const before = this.recording.get(view.channelId);
    const recorded = before ? before.then(() => this.recordNow(view), () => this.recordNow(view)) : this.recordNow(view);
    const settled = recorded.then(
      () => undefined,
      () => undefined,
    );
    this.recording.set(view.channelId, settled);
    void settled.then(() => {
      if (this.recording.get(view.channelId) === settled) this.recording.delete(view.channelId);
    });
    return recorded;
  }

  private async recordNow(view: ChannelView): Promise<boolean> {
    const known = await this.keyOf(view.channelId);
    if (known === view.viewKey && known !== UNKNOWN_VIEW) return false;
    const followers = await this.write(view);
    this.cache.set(view.channelId, view.viewKey);
    for (const follower of followers) this.cache.set(follower, view.viewKey);
    return true;
  }

  /**
   * Writes go in batches, one transaction per turn of the event loop: a thousand channels
   * recorded at start (or their first messages) cost one commit, not a thousand, and on
   * PostgreSQL their statements leave pipelined. Resolves with the public threads that follow.
   */
  private write(view: ChannelView): Promise<string[]> {
    return new Promise((resolve, reject) => {
      this.batch.push({ view, resolve, reject });
      if (this.batch.length === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.batch;
    this.batch = [];
    const now = Date.now();
    try {
      const followers = await this.db.transaction(() =>
        Promise.all(
          batch.map(async ({ view }) => {
            const [, rows] = await Promise.all([
              this.statements.upsert.run(view.channelId, view.guildId, view.parentId ?? null, view.viewKey, now),
              this.statements.follow.all(view.viewKey, now, view.channelId) as Promise<Array<{ channel_id: string }>>,
            ]);
            return rows.map((row) => row.channel_id);
          }),
        ),
      );
      batch.forEach((item, index) => item.resolve(followers[index]!));
    } catch (error) {
      for (const item of batch) item.reject(error);
    }
  }

  async keyOf(channelId: string): Promise<string> {
    const cached = this.cache.get(channelId);
    if (cached !== undefined) return cached;
    const row = (await this.statements.viewKey.row(channelId)) as { view_key: string } | undefined;
    const key = row?.view_key ?? UNKNOWN_VIEW;
    // Unknown is remembered too (every message of an unrecorded channel asked again otherwise):
    // `record` replaces it, and a row another process writes is read at the next start.
    this.cache.set(channelId, key);
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
