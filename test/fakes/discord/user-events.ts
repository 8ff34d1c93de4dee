/**
 * What people in Discord do while the bot watches: write, edit and delete messages, run slash
 * commands, change a channel's permissions. Each changes the fake's state and dispatches the
 * gateway event Discord would send for it.
 */
import type { FakeGateway } from './gateway.js';
import { channelPayload, memberPayload, mentionPayload, userPayload } from './payloads.js';
import { guildOf, type DiscordState } from './state.js';
import { FAKE_BOT_ID, type FakeOverwrite, type SendInteractionOptions, type SendMessageOptions } from './types.js';

export class UserEvents {
  constructor(
    private readonly state: DiscordState,
    private readonly gateway: FakeGateway,
    /** Where the fake's CDN serves attachments (`http://127.0.0.1:port`), known once it listens. */
    private readonly origin: () => string,
  ) {}

  /** A user writes in a channel; returns the new message's id. */
  sendMessage(options: SendMessageOptions): string {
    const channel = this.state.requireChannel(options.channelId);
    const author = this.state.requireUser(options.authorId);
    const id = this.state.nextId();
    const mentionIds = [...(options.mentionUserIds ?? [])];
    let content = options.content;
    if (options.mentionsBot) {
      mentionIds.push(FAKE_BOT_ID);
      content = `<@${FAKE_BOT_ID}> ${content}`;
    }
    const guildId = guildOf(channel);
    const payload: Record<string, unknown> = {
      id,
      channel_id: channel.id,
      author: userPayload(author),
      content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: mentionIds.map((userId) => mentionPayload(this.state.requireUser(userId), guildId)),
      mention_roles: options.mentionRoleIds ?? [],
      attachments: (options.attachments ?? []).map((attachment) => {
        const attachmentId = this.state.nextId();
        let url = `https://cdn.invalid/${attachment.filename}`;
        let size = attachment.size ?? 1024;
        if (attachment.data !== undefined) {
          const data = Buffer.isBuffer(attachment.data) ? attachment.data : Buffer.from(attachment.data, 'utf8');
          const filePath = `/cdn/attachments/${attachmentId}/${encodeURIComponent(attachment.filename)}`;
          this.state.files.set(filePath, { data, contentType: attachment.contentType ?? 'application/octet-stream' });
          url = `${this.origin()}${filePath}`;
          size = attachment.size ?? data.length;
        }
        return {
          id: attachmentId,
          filename: attachment.filename,
          size,
          url,
          proxy_url: url,
          ...(attachment.contentType ? { content_type: attachment.contentType } : {}),
          ...(attachment.width !== undefined ? { width: attachment.width, height: attachment.height ?? attachment.width } : {}),
        };
      }),
      embeds: (options.embeds ?? []).map((embed) => ({ type: 'rich', ...embed })),
      pinned: false,
      type: 0,
      flags: 0,
    };
    if (guildId) {
      payload.guild_id = guildId;
      payload.member = memberPayload(author);
    } else {
      payload.channel_type = 1;
    }
    if (options.replyToMessageId) {
      const referenced = this.state.messages.get(options.replyToMessageId);
      payload.type = 19;
      payload.message_reference = {
        message_id: options.replyToMessageId,
        channel_id: channel.id,
        ...(guildId ? { guild_id: guildId } : {}),
      };
      payload.referenced_message = referenced ?? null;
      const referencedAuthor = (referenced?.author as { id?: string } | undefined)?.id;
      if (referencedAuthor && !mentionIds.includes(referencedAuthor)) {
        (payload.mentions as unknown[]).push(mentionPayload(this.state.requireUser(referencedAuthor), guildId));
      }
    }
    this.state.messages.set(id, payload);
    this.gateway.dispatch('MESSAGE_CREATE', payload);
    return id;
  }

  editMessage(options: { messageId: string; content: string }): void {
    const original = this.state.messages.get(options.messageId);
    if (!original) throw new Error(`fake discord: no message ${options.messageId}`);
    const updated = { ...original, content: options.content, edited_timestamp: new Date().toISOString() };
    this.state.messages.set(options.messageId, updated);
    this.gateway.dispatch('MESSAGE_UPDATE', updated);
  }

  deleteMessage(options: { channelId: string; messageId: string }): void {
    const channel = this.state.requireChannel(options.channelId);
    const guildId = guildOf(channel);
    this.state.messages.delete(options.messageId);
    this.gateway.dispatch('MESSAGE_DELETE', {
      id: options.messageId,
      channel_id: channel.id,
      ...(guildId ? { guild_id: guildId } : {}),
    });
  }

  bulkDelete(options: { channelId: string; messageIds: string[] }): void {
    const channel = this.state.requireChannel(options.channelId);
    const guildId = guildOf(channel);
    for (const id of options.messageIds) this.state.messages.delete(id);
    this.gateway.dispatch('MESSAGE_DELETE_BULK', {
      ids: options.messageIds,
      channel_id: channel.id,
      ...(guildId ? { guild_id: guildId } : {}),
    });
  }

  /** A slash command invocation; returns the interaction id. */
  sendInteraction(options: SendInteractionOptions): { id: string; token: string } {
    const channel = this.state.requireChannel(options.channelId);
    const user = this.state.requireUser(options.userId);
    const guildId = guildOf(channel);
    const id = this.state.nextId();
    const token = `token-${id}`;
    const valueOptions = Object.entries(options.options ?? {}).map(([name, value]) => ({
      name,
      type: typeof value === 'number' ? 4 : 3,
      value,
    }));
    const commandOptions = options.subcommand
      ? [{ name: options.subcommand, type: 1, options: valueOptions }]
      : valueOptions;
    const member = guildId
      ? { ...memberPayload(user), user: userPayload(user), permissions: options.permissions ?? '0' }
      : undefined;
    this.gateway.dispatch('INTERACTION_CREATE', {
      id,
      application_id: FAKE_BOT_ID,
      type: 2,
      token,
      version: 1,
      channel_id: channel.id,
      channel: { id: channel.id, type: channel.type, name: channel.name },
      ...(guildId ? { guild_id: guildId, member, guild_locale: 'en-US' } : { user: userPayload(user) }),
      app_permissions: '0',
      locale: 'en-US',
      entitlements: [],
      authorizing_integration_owners: {},
      context: guildId ? 0 : 1,
      data: { id: this.state.nextId(), name: options.name, type: 1, options: commandOptions },
    });
    return { id, token };
  }

  /** Replaces a channel's permission overwrites and tells the bot (CHANNEL_UPDATE). */
  setOverwrites(channelId: string, overwrites: FakeOverwrite[]): void {
    const channel = this.state.requireChannel(channelId);
    channel.overwrites = overwrites;
    this.gateway.dispatch('CHANNEL_UPDATE', channelPayload(channel));
  }
}
