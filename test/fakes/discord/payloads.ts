/**
 * The JSON the fake sends for users, members, channels, guilds and the bot's messages, shaped as
 * discord.js expects it (on the gateway and over REST alike).
 */
import { guildOf, type DiscordState } from './state.js';
import { FAKE_BOT_ID, FAKE_GUILD_ID, type FakeChannel, type FakeUser } from './types.js';

/** A message the bot posted (through REST, or as an interaction follow-up). */
export function messagePayload(state: DiscordState, options: { id: string; channelId: string; content: string; referenceId?: string }): Record<string, unknown> {
  const channel = state.channels.get(options.channelId);
  const guildId = channel ? guildOf(channel) : undefined;
  const bot = state.requireUser(FAKE_BOT_ID);
  return {
    id: options.id,
    channel_id: options.channelId,
    author: userPayload(bot),
    content: options.content,
    timestamp: new Date().toISOString(),
    ...plainMessageFields(),
    type: options.referenceId ? 19 : 0,
    ...(guildId ? { guild_id: guildId, member: memberPayload(bot) } : { channel_type: 1 }),
    ...(options.referenceId
      ? {
          message_reference: { message_id: options.referenceId, channel_id: options.channelId },
          referenced_message: state.messages.get(options.referenceId) ?? null,
        }
      : {}),
  };
}

/** GUILD_CREATE: a guild with its channels, threads, roles and members. */
export function guildPayload(state: DiscordState, guildId: string = FAKE_GUILD_ID): Record<string, unknown> {
  // The default guild keeps every guild channel, as it always has, unless other guilds are declared.
  const guildChannels = [...state.channels.values()].filter(
    (channel) => channel.type !== 1 && (state.extraGuilds.length === 0 || guildOf(channel) === guildId),
  );
  const joinedAt = new Date(0).toISOString();
  return {
    id: guildId,
    name: state.extraGuilds.find((guild) => guild.id === guildId)?.name ?? 'Fake Guild',
    icon: null,
    splash: null,
    discovery_splash: null,
    owner_id: [...state.users.values()].find((user) => !user.bot)?.id ?? FAKE_BOT_ID,
    afk_channel_id: null,
    afk_timeout: 300,
    verification_level: 0,
    default_message_notifications: 0,
    explicit_content_filter: 0,
    features: [],
    mfa_level: 0,
    system_channel_id: null,
    system_channel_flags: 0,
    rules_channel_id: null,
    vanity_url_code: null,
    description: null,
    banner: null,
    premium_tier: 0,
    preferred_locale: 'en-US',
    public_updates_channel_id: null,
    nsfw_level: 0,
    premium_progress_bar_enabled: false,
    joined_at: joinedAt,
    large: false,
    unavailable: false,
    member_count: state.users.size,
    roles: [
      { id: guildId, name: '@everyone', permissions: '1024', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 },
      ...state.roles.map((role, index) => ({
        id: role.id,
        name: role.name,
        permissions: '0',
        position: index + 1,
        color: 0,
        hoist: false,
        managed: false,
        mentionable: true,
        flags: 0,
      })),
    ],
    emojis: [],
    stickers: [],
    channels: guildChannels.filter((channel) => channel.type === 0).map((channel) => channelPayload(channel)),
    threads: guildChannels.filter((channel) => channel.type === 11 || channel.type === 12).map((channel) => channelPayload(channel)),
    members: [...state.users.values()].filter((user) => user.roles !== undefined || user.id === FAKE_BOT_ID || !user.bot).map((user) => ({
      ...memberPayload(user),
      user: userPayload(user),
    })),
    presences: [],
    voice_states: [],
    stage_instances: [],
    guild_scheduled_events: [],
    soundboard_sounds: [],
  };
}

export function channelPayload(channel: FakeChannel): Record<string, unknown> {
  if (channel.type === 1) {
    return { id: channel.id, type: 1, recipients: [], last_message_id: null };
  }
  const base = {
    id: channel.id,
    type: channel.type,
    name: channel.name,
    guild_id: guildOf(channel) ?? FAKE_GUILD_ID,
    position: 0,
    permission_overwrites: (channel.overwrites ?? []).map((overwrite) => ({ ...overwrite })),
    nsfw: false,
    topic: null,
    last_message_id: null,
    rate_limit_per_user: 0,
  };
  if (channel.type === 11 || channel.type === 12) {
    return {
      ...base,
      parent_id: channel.parentId ?? null,
      owner_id: FAKE_BOT_ID,
      message_count: 0,
      member_count: 1,
      total_message_sent: 0,
      thread_metadata: {
        archived: false,
        auto_archive_duration: 1440,
        archive_timestamp: new Date().toISOString(),
        locked: false,
      },
    };
  }
  return { ...base, parent_id: null };
}

export function userPayload(user: FakeUser): Record<string, unknown> {
  return {
    id: user.id,
    username: user.username,
    global_name: user.globalName ?? null,
    discriminator: '0',
    avatar: null,
    bot: user.bot ?? false,
  };
}

export function memberPayload(user: FakeUser): Record<string, unknown> {
  return {
    nick: user.nick ?? null,
    roles: user.roles ?? [],
    joined_at: new Date(0).toISOString(),
    deaf: false,
    mute: false,
    flags: 0,
    avatar: null,
  };
}

/** A mentioned user; in a guild with the member fields too. */
export function mentionPayload(user: FakeUser, guildId: string | undefined): Record<string, unknown> {
  return guildId ? { ...userPayload(user), member: memberPayload(user) } : userPayload(user);
}

/** The fields of a message with no mentions, files or embeds (fresh arrays for each message). */
export function plainMessageFields(): Record<string, unknown> {
  return {
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: [],
    mention_roles: [],
    attachments: [],
    embeds: [],
    pinned: false,
    type: 0,
    flags: 0,
  };
}
