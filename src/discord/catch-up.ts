import type { Client, Message } from 'discord.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { CatchUpPoint } from '../channel/catch-up-points.js';

/** Where active channels' stored history ends (`CatchUpPoints` over SQLite satisfies it). */
export interface CatchUpSource {
  active(limit: number): CatchUpPoint[];
}

export interface CatchUpOptions {
  client: Client;
  source: CatchUpSource;
  events: EventStream;
  /** Records one fetched message as if it had arrived live (without answering it). */
  record(message: Message): Promise<void>;
  limits: () => { channels: number; messagesPerChannel: number };
}

/** Discord's largest page of channel history. */
const PAGE = 100;

/**
 * Fills the gap an outage left: for each recently active channel, fetches through REST the
 * messages after the last one stored, oldest first, page by page (bounded per channel), and
 * records them in order; ingest is idempotent per message id, so nothing is stored twice. While
 * a channel catches up, its live messages wait (`before`), so history stays in order and the bot
 * answers only once it has read what it missed.
 */
export class ChannelCatchUp {
  private readonly running = new Map<string, Promise<void>>();

  constructor(private readonly options: CatchUpOptions) {}

  /** Resolves when the channel's catch-up (if one is running) is done. */
  before(channelId: string): Promise<void> | undefined {
    return this.running.get(channelId);
  }

  /** Catches up every active channel, one at a time; `reason` goes into the events. */
  run(reason: 'start' | 'new_session'): Promise<void> {
    const { channels, messagesPerChannel } = this.options.limits();
    const points = this.options.source.active(channels).filter((point) => !this.running.has(point.channelId));
    // Registered at once, so that live messages of every channel in the list wait from now on.
    const gates = new Map<string, () => void>();
    for (const point of points) {
      this.running.set(point.channelId, new Promise<void>((resolve) => gates.set(point.channelId, resolve)));
    }
    return (async () => {
      for (const point of points) {
        try {
          await this.channel(point, messagesPerChannel, reason);
        } finally {
          this.running.delete(point.channelId);
          gates.get(point.channelId)!();
        }
      }
    })();
  }

  private async channel(point: CatchUpPoint, limit: number, reason: string): Promise<void> {
    const { client, events } = this.options;
    let fetched = 0;
    let after = point.lastMessageId;
    try {
      const channel = client.channels.cache.get(point.channelId) ?? (await client.channels.fetch(point.channelId));
      if (!channel || !('messages' in channel) || !channel.isTextBased()) return;
      while (fetched < limit) {
        const page = await channel.messages.fetch({ after, limit: Math.min(PAGE, limit - fetched), cache: false });
        if (page.size === 0) break;
        const ordered = [...page.values()].sort((left, right) => compareSnowflakes(left.id, right.id));
        for (const message of ordered) {
          await this.options.record(message);
          fetched += 1;
          after = message.id;
        }
        if (page.size < PAGE) break;
      }
      events.emit({ type: 'catch_up_completed', channel_id: point.channelId, reason, messages: fetched, truncated: fetched >= limit });
    } catch (error) {
      events.emit({ type: 'catch_up_failed', channel_id: point.channelId, reason, messages: fetched, error: errorMessage(error) });
    }
  }
}

function compareSnowflakes(left: string, right: string): number {
  const a = BigInt(left);
  const b = BigInt(right);
  return a < b ? -1 : a > b ? 1 : 0;
}
