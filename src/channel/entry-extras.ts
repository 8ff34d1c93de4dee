import { AttachmentStore, type StoredAttachment } from '../attachments/attachment-store.js';
import type { ContentBlock } from '../llm/chat-model.js';
import { placeholderOf, renderTextFile, type ResolvedAttachment } from '../attachments/resolve-attachments.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { HistoryStore } from './history-store.js';
import type { EntryDecorator } from './model-request.js';
import type { HistoryEntry } from '../context/types.js';
import { ReplyContext } from './reply-context.js';

/**
 * What goes to the model with a message besides its text: its images and text files, and the
 * archived message it replies to. Each is counted once, into the message's own estimate, so
 * that the running totals (and the Compactor's O(1) check) include them.
 */
export class EntryExtras {
  readonly attachments: AttachmentStore;
  readonly replies: ReplyContext;

  constructor(db: SqlClient, history: HistoryStore) {
    this.attachments = new AttachmentStore(db);
    this.replies = new ReplyContext(db, history);
  }

  /** Tokens a message's extras add to its estimate. */
  async tokensOf(channelId: string, seq: number): Promise<number> {
    const [files, reply] = await Promise.all([this.attachments.tokensOf(channelId, seq), this.replies.tokensOf(channelId, seq)]);
    return files + reply;
  }

  /**
   * Two indexed range reads per request, over the live messages only. Without `images` (the
   * channel's `vision` turned off, e.g. for a model that cannot read them) stored images are
   * left out; their estimate stays, erring on the side of compacting early.
   */
  async decorator(channelId: string, liveFromSeq: number, options: { images: boolean }): Promise<EntryDecorator | undefined> {
    const files = await this.attachments.liveFrom(channelId, liveFromSeq);
    if (!options.images) {
      for (const [seq, list] of files) {
        const kept = list.filter((file) => file.kind !== 'image');
        if (kept.length > 0) files.set(seq, kept);
        else files.delete(seq);
      }
    }
    const replies = await this.replies.liveFrom(channelId, liveFromSeq);
    if (files.size === 0 && replies.size === 0) return undefined;
    return (entry, block) => {
      const reply = replies.get(entry.seq);
      const attached = files.get(entry.seq) ?? [];
      if (!reply && attached.length === 0) return [block];
      return [...(reply ? [reply] : []), block, ...attached.map(toBlock)];
    };
  }

  /**
   * Keeps what the model can see of a message's files and returns the message's new text, each
   * `[attachment: NAME]` replaced by what the file became (a file that could not be downloaded
   * keeps its placeholder as it was).
   */
  async attach(channelId: string, entry: Pick<HistoryEntry, 'seq' | 'messageId' | 'content'>, files: readonly ResolvedAttachment[]): Promise<string> {
    await this.attachments.replace(
      channelId,
      entry.seq,
      entry.messageId,
      files.filter((file): file is StoredAttachment => file.kind !== 'file'),
    );
    let content = entry.content;
    for (const file of files) {
      if (file.kind === 'file' && file.failed) continue;
      const bare = `[attachment: ${file.name}]`;
      content = content.includes(bare) ? content.replace(bare, placeholderOf(file)) : `${content}\n${placeholderOf(file)}`.trim();
    }
    return content;
  }

  async delete(channelId: string, seqs: readonly number[]): Promise<void> {
    await this.attachments.delete(channelId, seqs);
    await this.replies.delete(channelId, seqs);
  }
}

function toBlock(file: StoredAttachment): ContentBlock {
  if (file.kind === 'image') return { type: 'image', source: { type: 'base64', media_type: file.mediaType, data: file.data } };
  return { type: 'text', text: renderTextFile(file) };
}
