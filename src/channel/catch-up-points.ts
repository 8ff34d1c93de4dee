import type { SqlClient } from '../storage/sql-client.js';
import { channelDialectFor } from './channel-dialect.js';

/** A channel that was active, and the newest platform message id stored for it. */
export interface CatchUpPoint {
  channelId: string;
  lastMessageId: string;
}

/** A person's message as stored: what the catch-up compares with what Discord lists now. */
export interface StoredMessage {
  messageId: string;
  content: string;
}

/**
 * Where each active channel's history ends, read from SQLite, so that after a restart or a
 * gateway session that could not be resumed the adapter fetches exactly what came after.
 * Only platform ids count (digits: Discord snowflakes), not the ids made up for tool traffic.
 */
export class CatchUpPoints {
  private readonly channels;
  private readonly lastOfPeople;
  private readonly last;
  private readonly recent;

  constructor(db: SqlClient) {
    this.channels = db.prepare(
      `SELECT channel_id, MAX(created_at) AS last_at FROM history_entries WHERE kind = 'message'
        GROUP BY channel_id ORDER BY last_at DESC LIMIT ?`,
    );
    // Newest first by seq (the primary key): stops at the first platform id. People's messages
    // first: the bot posts through REST while the gateway is down, so its reply can be newer
    // than messages written before it that only the catch-up will bring.
    const digitsOnly = channelDialectFor(db).digitsOnlyMessageId;
    this.lastOfPeople = db.prepare(
      `SELECT message_id FROM history_entries
        WHERE channel_id = ? AND kind = 'message' AND role = 'user' AND ${digitsOnly}
        ORDER BY seq DESC LIMIT 1`,
    );
    this.last = db.prepare(
      `SELECT message_id FROM history_entries
        WHERE channel_id = ? AND kind = 'message' AND ${digitsOnly}
        ORDER BY seq DESC LIMIT 1`,
    );
    // People's messages only: the bot's own replies (chunked, streamed, edited) need not be
    // stored under the ids Discord lists for them, and must never look deleted by mistake.
    this.recent = db.prepare(
      `SELECT message_id, content FROM history_entries
        WHERE channel_id = ? AND kind = 'message' AND role = 'user' AND ${digitsOnly}
        ORDER BY seq DESC LIMIT ?`,
    );
  }

  /** The newest `limit` of people's messages stored for the channel (history and archive), newest first. */
  async recentMessages(channelId: string, limit: number): Promise<StoredMessage[]> {
    if (limit <= 0) return [];
    const rows = (await this.recent.all(channelId, limit)) as Array<{ message_id: string; content: string }>;
    return rows.map((row) => ({ messageId: row.message_id, content: row.content }));
  }

  /** The `limit` most recently active channels with a platform message stored. */
  async active(limit: number): Promise<CatchUpPoint[]> {
    if (limit <= 0) return [];
    const points: CatchUpPoint[] = [];
    for (const row of (await this.channels.all(limit)) as Array<{ channel_id: string }>) {
      const last = await this.lastMessageId(row.channel_id);
      if (last) points.push({ channelId: row.channel_id, lastMessageId: last });
    }
    return points;
  }

  async lastMessageId(channelId: string): Promise<string | undefined> {
    const row = ((await this.lastOfPeople.get(channelId)) ?? (await this.last.get(channelId))) as { message_id: string } | undefined;
    return row?.message_id;
  }
}
