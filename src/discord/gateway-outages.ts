import type { EventStream } from '../common/events.js';

/**
 * What an operator sees of a gateway outage: discord.js tries to reconnect about twice a
 * second, so of its attempts only the 1st, 2nd, 4th, 8th... are logged (`discord_reconnecting`,
 * with the attempt and how long the shard has been down), then one `discord_reconnected` once a
 * session is back (resumed, or a new one), with the attempts and the time it took.
 */
export class GatewayOutages {
  /** Shards reconnecting now: since when, and how many attempts so far. */
  private readonly outages = new Map<number, { since: number; attempts: number }>();

  constructor(private readonly events: EventStream) {}

  reconnecting(shardId: number): void {
    const outage = this.outages.get(shardId) ?? { since: performance.now(), attempts: 0 };
    outage.attempts += 1;
    this.outages.set(shardId, outage);
    if ((outage.attempts & (outage.attempts - 1)) === 0) {
      this.events.emit({ type: 'discord_reconnecting', shard_id: shardId, attempt: outage.attempts, down_ms: this.downMs(outage) });
    }
  }

  /** A shard has a session again; nothing is told unless it was reconnecting. */
  back(shardId: number, resumed: boolean): void {
    const outage = this.outages.get(shardId);
    if (!outage) return;
    this.outages.delete(shardId);
    this.events.emit({ type: 'discord_reconnected', shard_id: shardId, attempts: outage.attempts, down_ms: this.downMs(outage), resumed });
  }

  private downMs(outage: { since: number }): number {
    return Math.round(performance.now() - outage.since);
  }
}
