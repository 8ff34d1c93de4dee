/**
 * The fake Discord's public vocabulary: the ids every test shares, what a test declares (users,
 * channels, roles, options) and what it reads back (the bot's requests, posts, edits, replies).
 */

export const FAKE_BOT_ID = '900000000000000001';
export const FAKE_GUILD_ID = '800000000000000001';

export interface FakeUser {
  id: string;
  username: string;
  globalName?: string;
  bot?: boolean;
  /** Guild member fields (ignored for DM-only users). */
  nick?: string;
  roles?: string[];
}

export interface FakeChannel {
  id: string;
  name: string;
  /** 0 text, 11 public thread, 12 private thread, 1 DM. */
  type: 0 | 11 | 12 | 1;
  parentId?: string;
  guildId?: string;
  /** Permission overwrites (role: type 0, member: type 1); none by default. */
  overwrites?: FakeOverwrite[];
}

/** A channel permission overwrite as Discord sends it (bitfields as decimal strings). */
export interface FakeOverwrite {
  id: string;
  type: 0 | 1;
  allow: string;
  deny: string;
}

/** The View Channel permission bit, as a decimal string. */
export const VIEW_CHANNEL = '1024';

export interface FakeRole {
  id: string;
  name: string;
}

export interface FakeDiscordOptions {
  users?: FakeUser[];
  channels?: FakeChannel[];
  roles?: FakeRole[];
  /** How often the client is asked to heartbeat. */
  heartbeatIntervalMs?: number;
  /** Echo the bot's own posted messages back as MESSAGE_CREATE, as Discord does. */
  echoBotMessages?: boolean;
  /**
   * Shards, as `GET /gateway/bot` recommends them (default 1). Events route as Discord routes
   * them: a guild's to shard `(guild_id >> 22) % shards`, DMs to shard 0; a client's IDENTIFY
   * `shard: [id, count]` says which shard its session is.
   */
  shards?: number;
  /** Guilds besides the default one (channels name theirs in `guildId`). */
  guilds?: Array<{ id: string; name?: string }>;
  /** Listen on this port (default: any free one); a test can point the bot here before it is up. */
  port?: number;
  /** Answer REST with 401 Unauthorized, as Discord does for a token it does not know. */
  rejectToken?: boolean;
  /** Close the gateway with 4014 (disallowed intents) at IDENTIFY, as Discord does when a privileged intent is off. */
  disallowIntents?: boolean;
}

/** One HTTP request the bot made. */
export interface RecordedRequest {
  method: string;
  path: string;
  body: unknown;
  at: number;
}

/** A message the bot posted through REST. */
export interface PostedMessage {
  id: string;
  channelId: string;
  content: string;
  messageReference?: { message_id: string };
  allowedMentions?: { parse?: string[]; replied_user?: boolean; users?: string[]; roles?: string[] };
  flags?: number;
  /** When the fake received it (ms since the epoch). */
  at?: number;
}

/** An answer to an interaction (callback, follow-up or edit of the original). */
export interface InteractionReply {
  interactionId?: string;
  token: string;
  kind: 'callback' | 'followup' | 'edit';
  type?: number;
  content?: string;
  flags?: number;
}

export interface SendMessageOptions {
  channelId: string;
  authorId: string;
  content: string;
  /** Adds `<@bot>` at the start and the bot to the mentions. */
  mentionsBot?: boolean;
  /** Users mentioned (their `<@id>` must be in the content to read naturally). */
  mentionUserIds?: string[];
  mentionRoleIds?: string[];
  replyToMessageId?: string;
  /**
   * Files on the message. With `data`, the file is served by the fake's CDN route (its URL
   * points at this server) with `contentType`; without, the URL points nowhere.
   */
  attachments?: Array<{ filename: string; size?: number; data?: Buffer | string; contentType?: string; width?: number; height?: number }>;
  embeds?: Array<{ title?: string; description?: string }>;
}

/** An edit (PATCH) or removal (DELETE) the bot made to one of its messages. */
export interface MessageEdit {
  channelId: string;
  messageId: string;
  /** The new content; undefined for a removal. */
  content?: string;
  kind: 'edit' | 'delete';
  /** When the fake received it (ms since the epoch). */
  at: number;
}

export interface SendInteractionOptions {
  channelId: string;
  userId: string;
  name: string;
  subcommand?: string;
  options?: Record<string, string | number>;
  /** Permission bitfield of the member as a decimal string; default: none. */
  permissions?: string;
}
