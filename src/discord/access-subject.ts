import type { ChatInputCommandInteraction } from 'discord.js';
import type { AccessSubject } from './access-policy.js';
import type { NormalizedMessage } from './normalize-message.js';

/** The author and place of a message, as the access policy judges them. */
export function messageSubject(normalized: NormalizedMessage, selfId: string): AccessSubject {
  const { incoming } = normalized;
  return {
    selfId,
    authorId: incoming.authorId,
    authorIsBot: normalized.authorIsBot,
    ...(incoming.guildId ? { guildId: incoming.guildId } : {}),
    channelId: incoming.channelId,
    ...(normalized.parentId ? { parentId: normalized.parentId } : {}),
    roleIds: normalized.roleIds,
  };
}

/** The user and place of a slash command, as the access policy judges them. */
export function interactionSubject(interaction: ChatInputCommandInteraction, selfId: string): AccessSubject {
  const channel = interaction.channel;
  const parentId = channel?.isThread() ? (channel.parentId ?? undefined) : undefined;
  return {
    selfId,
    authorId: interaction.user.id,
    authorIsBot: interaction.user.bot,
    ...(interaction.guildId ? { guildId: interaction.guildId } : {}),
    channelId: interaction.channelId,
    ...(parentId ? { parentId } : {}),
    roleIds: interaction.inCachedGuild() ? [...interaction.member.roles.cache.keys()] : rawRoles(interaction),
  };
}

/** Roles of a member Discord sent without caching its guild: plain ids, when there at all. */
function rawRoles(interaction: ChatInputCommandInteraction): string[] {
  const member = interaction.member as { roles?: unknown } | null;
  return Array.isArray(member?.roles) ? (member.roles as string[]) : [];
}
