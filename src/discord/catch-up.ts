import type { Client, Message } from 'discord.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { CatchUpPoint, StoredMessage } from '../channel/catch-up-points.js';

/** Where active channels' stored history ends (`CatchUpPoints` over SQLite satisfies it). */
export interface CatchUpSource {
  active(limit: number): Promise<CatchUpPoint[]>;
  /** Newest of people's messages stored for a channel, newest first (absent: no reconciliation of deletes and edits). */
  recentMessages?(channelId: string, limit: number): Promise<StoredMessage[]>;
}

export interface CatchUpOptions {
  client: Client;
  source: CatchUpSource;
  events: EventStream;
  /** Records one fetched message as if it had arrived live (without answering it). */
  record(message: Message): Promise<void>;
  /** Applies deletes through the same path as a live MESSAGE_DELETE (every copy goes). */
  remove?(channelId: string, messageIds: string[]): Promise<void>;
  /**
   * Applies an edit through the same path as a live MESSAGE_UPDATE when the message's text
   * differs from `stored` (the old text leaves every copy); true when it was applied.
   */
  edit?(message: Message, stored: string): Promise<boolean>;
  limits: () => { channels: number; messagesPerChannel: number };
}

/** Discord's largest page of channel history. */
const PAGE = 100;

/**
 * Reconciliation looks at most this many of a channel's newest stored messages, and only
 * those of the last day, whichever is fewer: enough to cover the deletes and edits of a typical outage,
 * while a catch-up over many channels costs at most a few REST pages each.
 */
const RECONCILE_MESSAGES = 100;
const RECONCILE_MS = 24 * 60 * 60 * 1000;
/** Pages of Discord history read backwards per channel to cover that window. */
const RECONCILE_PAGES = 3;
/** Discord's epoch: a snowflake's top bits are milliseconds since then. */
const DISCORD_EPOCH = 1_420_070_400_000n;

/**
 * Fills the gap an outage left: for each recently active channel, fetches through REST the
 * messages after the last one stored, oldest first, page by page (bounded per channel), and
 * records them in order; ingest is idempotent per message id, so nothing is stored twice. First
 * it reconciles the deletes and edits made meanwhile over a bounded recent window (`reconcile`). While
 * a channel catches up, its live messages wait (`before`), so history stays in order and the bot
 * answers only once it has read what it missed.
 */
export class ChannelCatchUp {
  private readonly running = new Map<string, Promise<void>>();
  /** While the list of channels is read, which channels will catch up is not known yet. */
  private listing: Promise<void> | undefined;

  constructor(private readonly options: CatchUpOptions) {}

  /** Resolves when the channel's catch-up (if one is running, or may be about to) is done. */
  before(channelId: string): Promise<void> | undefined {
    const running = this.running.get(channelId);
    if (running || !this.listing) return running;
    return this.listing.then(() => this.running.get(channelId));
  }

  /** Catches up every active channel, one at a time; `reason` goes into the events. */
  async run(reason: 'start' | 'new_session' | 'storage_recovered'): Promise<void> {
    const { channels, messagesPerChannel } = this.options.limits();
    // A live message stored before the list is read would become its channel's catch-up point,
    // and what was written before it during the outage would never be fetched: it waits too.
    let listed!: () => void;
    const listing = new Promise<void>((resolve) => (listed = resolve));
    this.listing = listing;
    let points: CatchUpPoint[];
    const gates = new Map<string, () => void>();
    try {
      points = (await this.options.source.active(channels)).filter((point) => !this.running.has(point.channelId));
      // Registered as soon as the list is read, so that live messages of every channel in it wait from now on.
      for (const point of points) {
        this.running.set(point.channelId, new Promise<void>((resolve) => gates.set(point.channelId, resolve)));
      }
    } finally {
      if (this.listing === listing) this.listing = undefined;
      listed();
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
      // A failed reconciliation must not keep the channel from fetching what it missed.
      try {
        await this.reconcile(point.channelId, channel.messages);
      } catch (error) {
        events.emit({ type: 'catch_up_deletes_failed', channel_id: point.channelId, reason, error: errorMessage(error) });
      }
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

  /**
   * Deletes and edits made while the bot was away sent no event. Over the channel's recent
   * window, a stored message that Discord no longer lists is deleted through the live delete
   * path, and one Discord lists as edited, with other text than stored, goes through the live
   * edit path. Only ids inside the exact range Discord's pages covered are compared: a message
   * merely older than what was fetched is never taken for deleted.
   */
  private async reconcile(channelId: string, messages: HistoryReader): Promise<void> {
    const { source, remove, edit, events } = this.options;
    if (!source.recentMessages || (!remove && !edit)) return;
    const since = Date.now() - RECONCILE_MS;
    const stored = (await source.recentMessages(channelId, RECONCILE_MESSAGES)).filter((message) => snowflakeTime(message.messageId) >= since);
    if (stored.length === 0) return;
    const newest = stored[0]!.messageId;
    const oldest = stored.at(-1)!.messageId;
    const listed = new Map<string, Message>();
    // Pages newest first, starting just above the newest stored id so that it is included.
    let before = (BigInt(newest) + 1n).toString();
    // The lowest id the pages vouch for: below it Discord was not asked.
    let coveredFrom: bigint | undefined;
    for (let page = 0; page < RECONCILE_PAGES; page += 1) {
      const result = await messages.fetch({ before, limit: PAGE, cache: false });
      let lowest: string | undefined;
      for (const [id, message] of result) {
        listed.set(id, message);
        if (lowest === undefined || compareSnowflakes(id, lowest) < 0) lowest = id;
      }
      if (result.size < PAGE || lowest === undefined) {
        coveredFrom = 0n; // a short page reached the start of the channel
        break;
      }
      coveredFrom = BigInt(lowest);
      if (compareSnowflakes(lowest, oldest) <= 0) break;
      before = lowest;
    }
    const compared = stored.filter((message) => coveredFrom !== undefined && BigInt(message.messageId) >= coveredFrom);
    const gone = compared.filter((message) => !listed.has(message.messageId)).map((message) => message.messageId);
    if (gone.length > 0 && remove) await remove(channelId, gone);
    let edited = 0;
    if (edit) {
      for (const message of compared) {
        const now = listed.get(message.messageId);
        // Never edited on Discord: whatever differs is ours (resolved files, a reply's label), not an edit.
        if (!now || now.editedTimestamp === null) continue;
        if (await edit(now, message.content)) edited += 1;
      }
    }
    const windowStart = compared.at(-1)?.messageId ?? newest;
    events.emit({
      type: 'catch_up_deletes_reconciled',
      channel_id: channelId,
      window_start: new Date(snowflakeTime(windowStart)).toISOString(),
      window_start_id: windowStart,
      messages_checked: compared.length,
      deletes_applied: remove ? gone.length : 0,
      edits_applied: edited,
    });
  }
}

/** The part of a channel's message manager that reconciliation reads. */
interface HistoryReader {
  fetch(options: { before: string; limit: number; cache: false }): Promise<{ size: number } & Iterable<[string, Message]>>;
}

function snowflakeTime(id: string): number {
  return Number((BigInt(id) >> 22n) + DISCORD_EPOCH);
}

function compareSnowflakes(left: string, right: string): number {
  const a = BigInt(left);
  const b = BigInt(right);
  return a < b ? -1 : a > b ? 1 : 0;
}
