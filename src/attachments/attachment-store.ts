import type { Migration } from '../storage/database.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { ImageMediaType } from '../llm/chat-model.js';
import type { ResolvedAttachment } from './resolve-attachments.js';

/**
 * What the model was given of a message's files: image bytes and inlined text, kept with the
 * message (by its history seq) so that every later request of the channel sends the same thing
 * without downloading it again, and so that a deleted message takes its files with it.
 */
export const ATTACHMENT_MIGRATIONS: readonly Migration[] = [
  {
    name: 'attachments-001-init',
    async up(db) {
      await db.exec(`
        CREATE TABLE message_attachments (
          channel_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          ordinal INTEGER NOT NULL,
          message_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          name TEXT NOT NULL,
          size INTEGER NOT NULL,
          media_type TEXT,
          width INTEGER,
          height INTEGER,
          tokens INTEGER NOT NULL,
          text TEXT,
          truncated INTEGER NOT NULL DEFAULT 0,
          max_chars INTEGER,
          data BLOB,
          PRIMARY KEY (channel_id, seq, ordinal)
        ) WITHOUT ROWID;
      `);
    },
    postgres: `
        CREATE TABLE message_attachments (
          channel_id TEXT NOT NULL,
          seq BIGINT NOT NULL,
          ordinal BIGINT NOT NULL,
          message_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          name TEXT NOT NULL,
          size BIGINT NOT NULL,
          media_type TEXT,
          width BIGINT,
          height BIGINT,
          tokens BIGINT NOT NULL,
          text TEXT,
          truncated BIGINT NOT NULL DEFAULT 0,
          max_chars BIGINT,
          data BYTEA,
          PRIMARY KEY (channel_id, seq, ordinal)
        );
      `,
  },
];

/** A file the model sees with its message. */
export type StoredAttachment = Extract<ResolvedAttachment, { kind: 'image' | 'text' }>;

interface AttachmentRow {
  seq: number;
  kind: 'image' | 'text';
  name: string;
  size: number;
  media_type: string | null;
  width: number | null;
  height: number | null;
  tokens: number;
  text: string | null;
  truncated: number;
  max_chars: number | null;
  data: Buffer | null;
}

export class AttachmentStore {
  private readonly statements;

  constructor(private readonly db: SqlClient) {
    this.statements = {
      insert: db.prepare(
        `INSERT OR REPLACE INTO message_attachments
           (channel_id, seq, ordinal, message_id, kind, name, size, media_type, width, height, tokens, text, truncated, max_chars, data)
         VALUES (@channelId, @seq, @ordinal, @messageId, @kind, @name, @size, @mediaType, @width, @height, @tokens, @text, @truncated, @maxChars, @data)`,
      ),
      clear: db.prepare('DELETE FROM message_attachments WHERE channel_id = ? AND seq = ?'),
      live: db.prepare('SELECT * FROM message_attachments WHERE channel_id = ? AND seq >= ? ORDER BY seq, ordinal'),
      tokens: db.prepare('SELECT COALESCE(SUM(tokens), 0) AS tokens FROM message_attachments WHERE channel_id = ? AND seq = ?'),
      imageTokens: db.prepare(
        "SELECT COALESCE(SUM(tokens), 0) AS tokens FROM message_attachments WHERE channel_id = ? AND seq >= ? AND kind = 'image'",
      ),
    };
  }

  /** Sets the files of one message (replacing what it had). */
  async replace(channelId: string, seq: number, messageId: string, files: readonly StoredAttachment[]): Promise<void> {
    await this.db.transaction(async () => {
      await this.statements.clear.run(channelId, seq);
      for (const [ordinal, file] of files.entries()) {
        await this.statements.insert.run({
          channelId,
          seq,
          ordinal,
          messageId,
          kind: file.kind,
          name: file.name,
          size: file.size,
          mediaType: file.kind === 'image' ? file.mediaType : null,
          width: file.kind === 'image' ? file.width : null,
          height: file.kind === 'image' ? file.height : null,
          tokens: file.tokens,
          text: file.kind === 'text' ? file.text : null,
          truncated: file.kind === 'text' && file.truncated ? 1 : 0,
          maxChars: file.kind === 'text' ? file.maxChars : null,
          data: file.kind === 'image' ? Buffer.from(file.data, 'base64') : null,
        });
      }
    });
  }

  /** Files of the messages from `fromSeq` on (the live ones), by seq: one indexed range read. */
  async liveFrom(channelId: string, fromSeq: number): Promise<Map<number, StoredAttachment[]>> {
    const bySeq = new Map<number, StoredAttachment[]>();
    for (const row of (await this.statements.live.all(channelId, fromSeq)) as AttachmentRow[]) {
      const list = bySeq.get(row.seq) ?? [];
      list.push(toAttachment(row));
      bySeq.set(row.seq, list);
    }
    return bySeq;
  }

  /** What a message's files add to its token estimate. */
  async tokensOf(channelId: string, seq: number): Promise<number> {
    return ((await this.statements.tokens.get(channelId, seq)) as { tokens: number }).tokens;
  }

  /** What the images of the messages from `fromSeq` on add to the estimate: one indexed range sum. */
  async imageTokensFrom(channelId: string, fromSeq: number): Promise<number> {
    return Number(((await this.statements.imageTokens.get(channelId, fromSeq)) as { tokens: number | bigint }).tokens);
  }

  async delete(channelId: string, seqs: readonly number[]): Promise<void> {
    await this.db.transaction(async () => {
      for (const seq of seqs) await this.statements.clear.run(channelId, seq);
    });
  }
}

function toAttachment(row: AttachmentRow): StoredAttachment {
  if (row.kind === 'image') {
    return {
      kind: 'image',
      name: row.name,
      size: row.size,
      mediaType: (row.media_type ?? 'image/png') as ImageMediaType,
      width: row.width ?? 0,
      height: row.height ?? 0,
      tokens: row.tokens,
      data: (row.data ?? Buffer.alloc(0)).toString('base64'),
    };
  }
  return {
    kind: 'text',
    name: row.name,
    size: row.size,
    text: row.text ?? '',
    truncated: row.truncated === 1,
    maxChars: row.max_chars ?? 0,
    tokens: row.tokens,
  };
}
