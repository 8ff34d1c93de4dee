import type { Message, PartialMessage } from 'discord.js';
import type { IncomingMessage } from '../context/types.js';
import { replyReference } from '../privacy/reply-reference.js';

/** A Discord message as the runtime and the policies see it. */
export interface NormalizedMessage {
  incoming: IncomingMessage;
  /** For a thread: the channel it belongs to (access and settings follow it). */
  parentId?: string;
  authorIsBot: boolean;
  roleIds: string[];
  mentionsBot: boolean;
  repliesToBot: boolean;
}

/** The name people see for the author: server nickname, else global name, else username. */
export function displayNameOf(message: Message | PartialMessage): string {
  return message.member?.displayName ?? message.author?.displayName ?? message.author?.username ?? 'unknown';
}

/**
 * Turns a Discord message into what the model reads: mentions resolved to names, the message
 * it replies to as a reference (resolved to a short quote when a request is built), attachments, embeds and stickers as placeholders. A
 * thread is its own channel.
 */
export function normalizeMessage(message: Message, selfId: string): NormalizedMessage {
  const channel = message.channel;
  const isThread = channel.isThread();
  const isDm = message.guildId === null;
  const parts: string[] = [];

  const reference = message.reference?.messageId ? message.channel.messages.cache.get(message.reference.messageId) : undefined;
  const repliedUserId = message.mentions.repliedUser?.id ?? reference?.author?.id;
  if (message.reference?.messageId) {
    // A reference, not a copy: the quote is resolved from history when a request is built.
    parts.push(replyReference(reference ? displayNameOf(reference) : 'an earlier message', message.reference.messageId));
  }
  const text = resolveMentions(message);
  if (text.trim() !== '') parts.push(text);
  for (const attachment of message.attachments.values()) parts.push(`[attachment: ${attachment.name}]`);
  for (const embed of message.embeds) {
    const title = embed.title ?? embed.url ?? embed.description?.slice(0, 60);
    parts.push(title ? `[embed: ${title}]` : '[embed]');
  }
  for (const sticker of message.stickers.values()) parts.push(`[sticker: ${sticker.name}]`);

  const incoming: IncomingMessage = {
    messageId: message.id,
    channelId: message.channelId,
    authorId: message.author.id,
    authorName: displayNameOf(message),
    role: 'user',
    content: parts.join('\n'),
    createdAt: message.createdTimestamp,
  };
  // Resolved from the archive when a request is built (see channel/reply-context.ts).
  if (message.reference?.messageId && (message.reference.channelId ?? message.channelId) === message.channelId) {
    incoming.replyToMessageId = message.reference.messageId;
  }
  if (message.guildId) incoming.guildId = message.guildId;
  if (isDm) incoming.dmUserId = message.author.id;
  const normalized: NormalizedMessage = {
    incoming,
    authorIsBot: message.author.bot,
    roleIds: message.member ? [...message.member.roles.cache.keys()].filter((id) => id !== message.guildId) : [],
    // People often mention the bot through its managed role rather than its user.
    mentionsBot: message.mentions.users.has(selfId) || message.mentions.roles.some((role) => role.tags?.botId === selfId),
    repliesToBot: repliedUserId === selfId,
  };
  if (isThread && channel.parentId) {
    normalized.parentId = channel.parentId;
    incoming.parentChannelId = channel.parentId;
  }
  return normalized;
}

/** `<@id>`, `<@&id>` and `<#id>` as the names people see. */
export function resolveMentions(message: Message | PartialMessage): string {
  const content = message.content ?? '';
  const client = message.client;
  return content
    .replace(/<@!?(\d+)>/g, (raw, id: string) => {
      const member = message.mentions?.members?.get(id) ?? message.guild?.members.cache.get(id);
      const user = message.mentions?.users.get(id) ?? client.users.cache.get(id);
      const name = member?.displayName ?? user?.displayName;
      return name ? `@${name}` : '@unknown-user';
    })
    .replace(/<@&(\d+)>/g, (raw, id: string) => {
      const role = message.guild?.roles.cache.get(id);
      return role ? `@${role.name}` : '@unknown-role';
    })
    .replace(/<#(\d+)>/g, (raw, id: string) => {
      const channel = client.channels.cache.get(id);
      return channel && 'name' in channel && channel.name ? `#${channel.name}` : '#unknown-channel';
    });
}

