import type { Client, Message } from 'discord.js';
import type { RedactedReply } from '../channel/message-changes.js';
import { DELETED_NOTE } from '../privacy/redact.js';
import { chunkMessage } from './chunk-message.js';

/** Later parts of a long reply are looked for among this many messages per part after its first. */
const PARTS_LOOKAHEAD = 4;

/**
 * Edits the bot's own Discord reply the way its stored copy was redacted (a quote of a deleted
 * message taken out). A reply longer than one Discord message was posted in parts: they are the
 * bot's next messages after the first, and each part whose text changed is edited; parts the
 * shorter text no longer fills say only that a message was deleted. Returns how many it edited.
 */
export async function editOwnReply(client: Client, reply: RedactedReply): Promise<number> {
  const channel = await client.channels.fetch(reply.channelId);
  if (!channel || !channel.isTextBased()) return 0;
  const before = chunkMessage(reply.before);
  const after = chunkMessage(reply.after);
  const ids = [reply.messageId];
  if (before.length > 1) {
    const later = await channel.messages.fetch({ after: reply.messageId, limit: Math.min(100, before.length * PARTS_LOOKAHEAD) });
    const own = [...later.values()]
      .filter((message: Message) => message.author.id === client.user?.id)
      .sort((left, right) => (BigInt(left.id) < BigInt(right.id) ? -1 : 1))
      .slice(0, before.length - 1);
    ids.push(...own.map((message) => message.id));
  }
  let edited = 0;
  for (const [index, id] of ids.entries()) {
    const content = after[index] ?? DELETED_NOTE;
    if (content === before[index]) continue;
    // The edit pings no one: the reply's mentions were delivered when it was posted.
    await channel.messages.edit(id, { content, allowedMentions: { parse: [] } });
    edited += 1;
  }
  return edited;
}
