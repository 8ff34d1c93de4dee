import type { TranscriptLine } from '../compaction/transcript-line.js';
import type { ApiMessage } from './discord-history.js';

/** Message types that are conversation: a plain message, a reply, a slash command's answer. */
const CONVERSATION_TYPES: ReadonlySet<number> = new Set([0, 19, 20]);

/**
 * One Discord message as a replay transcript line, or undefined for what is not conversation
 * (joins, pins, thread notices) and empty messages. Mentions become `@name`, attachments,
 * embeds and stickers placeholders, as the bot itself sees them; the bot's own messages are
 * the `assistant` side.
 */
export function transcriptLineFrom(message: ApiMessage, selfId: string): TranscriptLine | undefined {
  if (!CONVERSATION_TYPES.has(message.type)) return undefined;
  const names = new Map<string, string>();
  for (const user of message.mentions ?? []) names.set(user.id, user.global_name || user.username);
  let content = message.content.replace(/<@!?(\d+)>/g, (whole, id: string) => (names.has(id) ? `@${names.get(id)}` : whole));
  const parts = content.trim() === '' ? [] : [content];
  for (const attachment of message.attachments ?? []) parts.push(`[attachment: ${attachment.filename}]`);
  for (const embed of message.embeds ?? []) {
    const title = embed.title ?? embed.url ?? embed.description?.slice(0, 60);
    parts.push(title ? `[embed: ${title}]` : '[embed]');
  }
  for (const sticker of message.sticker_items ?? []) parts.push(`[sticker: ${sticker.name}]`);
  content = parts.join('\n');
  if (content.trim() === '') return undefined;
  return {
    id: message.id,
    channel: message.channel_id,
    // The unique account name: display names may be shared by two people.
    author: message.author.username,
    content,
    ts: message.timestamp,
    role: message.author.id === selfId ? 'assistant' : 'user',
  };
}
