/**
 * Which process may compact a channel. In one process the coordinator already runs one
 * compaction per channel; on a shared store (PostgreSQL) a second process serving the same
 * channel (a reshard, a mistaken second deployment) must not compact it at the same time.
 */
export interface ChannelLocks {
  /** Resolves true when this process now holds the channel's compaction lock. */
  tryAcquire(channelId: string): Promise<boolean>;
  /** Never rejects: a lock whose connection is gone is gone with it. */
  release(channelId: string): Promise<void>;
}
