import type { ChannelLocks } from '../channel-locks.js';
import type { SqlClient } from '../sql-client.js';

/**
 * Compaction locks as PostgreSQL session advisory locks on the writer's connection: a process
 * that dies mid-compaction loses its locks with its connection, and its splice never committed.
 */
export class PgChannelLocks implements ChannelLocks {
  private readonly lock;
  private readonly unlock;
  private readonly held = new Set<string>();

  constructor(db: SqlClient) {
    this.lock = db.prepare(`SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':compaction:' || ?, 0)) AS locked`);
    this.unlock = db.prepare(`SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':compaction:' || ?, 0)) AS unlocked`);
  }

  async tryAcquire(channelId: string): Promise<boolean> {
    // Session locks stack: taking one this process already holds would need two releases.
    if (this.held.has(channelId)) return true;
    const { locked } = (await this.lock.get(channelId)) as { locked: boolean };
    if (locked) this.held.add(channelId);
    return locked;
  }

  async release(channelId: string): Promise<void> {
    if (!this.held.delete(channelId)) return;
    try {
      await this.unlock.get(channelId);
    } catch {
      // The connection is gone, and the lock with it.
    }
  }
}
