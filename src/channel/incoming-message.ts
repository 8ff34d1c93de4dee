import { checkId, withoutNul } from '../common/outside-text.js';
import type { IncomingMessage } from '../context/types.js';

/** The fields of a message that are ids: looked up exactly, so refused rather than changed. */
const ID_FIELDS = ['messageId', 'channelId', 'authorId', 'guildId', 'dmUserId', 'parentChannelId', 'replyToMessageId'] as const;

/**
 * A message as the runtime takes it in, whatever brought it (Discord, the terminal, a replay
 * line): its ids checked (an id with a control character is refused, naming the field) and its
 * free text without U+0000 (see `common/outside-text.ts`), so that both backends store the same
 * text. Idempotent: replay calls it first to compare a line with what is stored.
 */
export function normalizeIncoming(message: IncomingMessage): IncomingMessage {
  for (const field of ID_FIELDS) {
    const value = message[field];
    if (value !== undefined) checkId(value, `message field "${field}"`);
  }
  const content = withoutNul(message.content);
  const authorName = withoutNul(message.authorName);
  return content === message.content && authorName === message.authorName ? message : { ...message, content, authorName };
}
