import type { Migration } from '../storage/database.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { TextBlock } from '../llm/chat-model.js';
import type { HistoryStore } from './history-store.js';
import { estimateTokens, MESSAGE_FRAMING_TOKENS } from '../context/token-estimate.js';
import type { HistoryEntry } from '../context/types.js';

/**
 * Replies as references. Every message that replies to another records which one; when the
 * replied-to message has already left the live context (compacted or truncated), the model gets
 * it back from the archive, with a short chain of what it replied to in turn, so "what did you
 * mean by this?" works after compaction. The text is looked up when each request is built,
 * never copied: an edit shows, and a deleted message is gone from here too.
 */
export const REPLY_MIGRATIONS: readonly Migration[] = [
  {
    name: 'replies-001-init',
    async up(db) {
      await db.exec(`
        CREATE TABLE message_replies (
          channel_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          message_id TEXT NOT NULL,
          reply_to TEXT NOT NULL,
          tokens INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (channel_id, seq)
        ) WITHOUT ROWID;
        CREATE INDEX message_replies_message ON message_replies (channel_id, message_id);
      `);
    },
    postgres: `
        CREATE TABLE message_replies (
          channel_id TEXT NOT NULL,
          seq BIGINT NOT NULL,
          message_id TEXT NOT NULL,
          reply_to TEXT NOT NULL,
          tokens BIGINT NOT NULL DEFAULT 0,
          PRIMARY KEY (channel_id, seq)
        );
        CREATE INDEX message_replies_message ON message_replies (channel_id, message_id);
      `,
  },
];

/** Messages brought back for one reply, at most (the one replied to and what it replied to). */
export const REPLY_CHAIN_LIMIT = 3;
/** Characters of each brought-back message, at most: the estimate stays a bound after edits. */
export const REPLY_QUOTE_CHARS = 1000;

const INTRO = '(This message replies to an earlier one that is no longer in view; from the archive, oldest first:)';

export class ReplyContext {
  private readonly statements;

  constructor(db: SqlClient, private readonly history: HistoryStore) {
    this.statements = {
      insert: db.prepare(
        'INSERT OR REPLACE INTO message_replies (channel_id, seq, message_id, reply_to, tokens) VALUES (?, ?, ?, ?, ?)',
      ),
      replyOf: db.prepare('SELECT reply_to FROM message_replies WHERE channel_id = ? AND message_id = ?'),
      live: db.prepare('SELECT seq, reply_to FROM message_replies WHERE channel_id = ? AND seq >= ? AND tokens > 0'),
      tokens: db.prepare('SELECT tokens FROM message_replies WHERE channel_id = ? AND seq = ?'),
      delete: db.prepare('DELETE FROM message_replies WHERE channel_id = ? AND seq = ?'),
    };
  }

  /**
   * Tokens the reply context of a new message will take while it is live: 0 when the message
   * replied to is still in view (or unknown here). Counted once, when the message is appended.
   */
  async estimate(channelId: string, replyTo: string, liveFromSeq: number): Promise<number> {
    const chain = await this.chain(channelId, replyTo, liveFromSeq);
    return chain.length === 0 ? 0 : estimateTokens(render(chain)) + MESSAGE_FRAMING_TOKENS;
  }

  async record(channelId: string, entry: Pick<HistoryEntry, 'seq' | 'messageId'>, replyTo: string, tokens: number): Promise<void> {
    await this.statements.insert.run(channelId, entry.seq, entry.messageId, replyTo, tokens);
  }

  /** What reply context adds to a message's estimate. */
  async tokensOf(channelId: string, seq: number): Promise<number> {
    return ((await this.statements.tokens.get(channelId, seq)) as { tokens: number } | undefined)?.tokens ?? 0;
  }

  /** The context blocks of the live messages that have one, by seq, resolved from the archive now. */
  async liveFrom(channelId: string, liveFromSeq: number): Promise<Map<number, TextBlock>> {
    const blocks = new Map<number, TextBlock>();
    for (const row of (await this.statements.live.all(channelId, liveFromSeq)) as Array<{ seq: number; reply_to: string }>) {
      const chain = await this.chain(channelId, row.reply_to, liveFromSeq);
      if (chain.length > 0) blocks.set(row.seq, { type: 'text', text: render(chain) });
    }
    return blocks;
  }

  async delete(channelId: string, seqs: readonly number[]): Promise<void> {
    for (const seq of seqs) await this.statements.delete.run(channelId, seq);
  }

  /** The replied-to message and its own reply chain, oldest first, only what is out of view. */
  private async chain(channelId: string, replyTo: string, liveFromSeq: number): Promise<HistoryEntry[]> {
    const chain: HistoryEntry[] = [];
    const seen = new Set<string>();
    let next: string | undefined = replyTo;
    while (next !== undefined && chain.length < REPLY_CHAIN_LIMIT && !seen.has(next)) {
      seen.add(next);
      const entry = await this.history.findByMessageId(channelId, next);
      // Gone (deleted, never seen) or still in view: nothing more to bring back.
      if (!entry || entry.seq >= liveFromSeq || entry.kind !== 'message') break;
      chain.unshift(entry);
      next = ((await this.statements.replyOf.get(channelId, next)) as { reply_to: string } | undefined)?.reply_to;
    }
    return chain;
  }
}

function render(chain: readonly HistoryEntry[]): string {
  const lines = chain.map((entry) => {
    const text = entry.content.length <= REPLY_QUOTE_CHARS ? entry.content : `${entry.content.slice(0, REPLY_QUOTE_CHARS - 1)}…`;
    return `[${new Date(entry.createdAt).toISOString().slice(0, 16).replace('T', ' ')} UTC] ${entry.authorName}: ${text}`;
  });
  return `${INTRO}\n${lines.join('\n')}`;
}
