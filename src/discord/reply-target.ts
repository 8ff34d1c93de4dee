import type { Message } from 'discord.js';
import type { ReplyTarget } from '../app/channel-responder.js';
import { chunkMessage } from './chunk-message.js';
import { StreamedReply } from './streamed-reply.js';

/** How often Discord needs the typing indicator renewed (it lapses after about 10 s). */
const TYPING_REFRESH_MS = 8_000;

/** Replies to the triggering message; later chunks follow as plain messages. */
export function replyTarget(trigger: Message): ReplyTarget {
  const channel = trigger.channel;
  // Users may be pinged by name; @everyone, @here and roles never.
  const allowedMentions = { parse: ['users' as const], repliedUser: true };
  return {
    stream: (options) =>
      new StreamedReply({
        ...(options?.redact ? { redact: options.redact } : {}),
        poster: {
          post: async (content, index) => {
            if (!channel.isSendable()) throw new Error('the channel no longer accepts messages');
            const posted = await channel.send({
              content,
              allowedMentions,
              ...(index === 0 ? { reply: { messageReference: trigger.id, failIfNotExists: false } } : {}),
            });
            return posted.id;
          },
          edit: async (id, content) => {
            await channel.messages.edit(id, { content, allowedMentions });
          },
          remove: async (id) => {
            await channel.messages.delete(id);
          },
        },
      }),
    send: async (text) => {
      if (!channel.isSendable()) return undefined;
      let firstId: string | undefined;
      for (const [index, chunk] of chunkMessage(text).entries()) {
        const posted = await channel.send({
          content: chunk,
          // Users may be pinged by name; @everyone, @here and roles never.
          allowedMentions: { parse: ['users'], repliedUser: true },
          ...(index === 0 ? { reply: { messageReference: trigger.id, failIfNotExists: false } } : {}),
        });
        firstId ??= posted.id;
      }
      return firstId;
    },
    startTyping: () => {
      if (!channel.isSendable()) return () => {};
      const typing = (): void => {
        channel.sendTyping().catch(() => {
          // A missed typing indicator is cosmetic.
        });
      };
      typing();
      const timer = setInterval(typing, TYPING_REFRESH_MS);
      return () => clearInterval(timer);
    },
  };
}
