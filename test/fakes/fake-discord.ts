/**
 * A small Discord on loopback: the gateway WebSocket (HELLO, IDENTIFY → READY + GUILD_CREATE,
 * heartbeats, RESUME with replay of missed events) and the REST routes the bot uses. The real
 * discord.js client connects to it with `rest: { api: fake.restApi }` and nothing patched.
 * Everything the bot sends is recorded so tests can assert on it.
 */
import { createServer, type IncomingMessage as HttpRequest, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

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

/** The gateway session of one shard other than 0 (shard 0 is the fake's own single session). */
interface ShardSession {
  socket: WebSocket;
  sessionId: string;
  sequence: number;
  authenticated: boolean;
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

interface Waiter<T> {
  predicate: (value: T) => boolean;
  resolve: (value: T) => void;
}

const DISCORD_EPOCH = 1_420_070_400_000n;

export class FakeDiscord {
  readonly requests: RecordedRequest[] = [];
  readonly posted: PostedMessage[] = [];
  readonly typing: string[] = [];
  /** When each typing request came (ms since the epoch), parallel to `typing`. */
  readonly typingAt: number[] = [];
  /** The bot's PATCH and DELETE requests on its messages, in order, with timestamps. */
  readonly edits: MessageEdit[] = [];
  /** Files served by the CDN route, by path. */
  private readonly files = new Map<string, { data: Buffer; contentType: string }>();
  /** How many times each CDN file was downloaded, by file name. */
  readonly downloads = new Map<string, number>();
  readonly interactionReplies: InteractionReply[] = [];
  readonly registeredCommands: Array<{ scope: string; commands: unknown[] }> = [];
  /** IDENTIFY and RESUME payloads received, in order. */
  readonly handshakes: Array<{ op: number; d: unknown }> = [];
  heartbeats = 0;
  /** GET /channels/:id/messages requests received (catch-up), in order. */
  readonly historyRequests: Array<{ channelId: string; after?: string; before?: string; around?: string }> = [];

  private readonly server: Server;
  private readonly wss: WebSocketServer;
  private socket: WebSocket | undefined;
  private authenticated = false;
  private sessionId = '';
  private sequence = 0;
  /** Every dispatch of the current session, for RESUME replay. */
  private dispatchLog: Array<{ s: number; t: string; d: unknown }> = [];
  private idCounter = 0n;
  private readonly users = new Map<string, FakeUser>();
  private readonly channels = new Map<string, FakeChannel>();
  private readonly roles: FakeRole[];
  private readonly messages = new Map<string, Record<string, unknown>>();
  private readonly postWaiters = new Set<Waiter<PostedMessage>>();
  private readonly interactionWaiters = new Set<Waiter<InteractionReply>>();
  private readonly readyWaiters = new Set<() => void>();
  private port = 0;
  private readonly requestedPort: number;
  private readonly rejectToken: boolean;
  private readonly disallowIntents: boolean;
  private readonly heartbeatIntervalMs: number;
  private readonly echoBotMessages: boolean;
  /** Answer POST /channels/:id/messages with this status instead (once per entry). */
  private readonly failNextPosts: number[] = [];
  private readonly shardCount: number;
  private readonly extraGuilds: Array<{ id: string; name?: string }>;
  /** Sessions of shards 1..N-1, by shard id. */
  private readonly shardSessions = new Map<number, ShardSession>();
  /** The `shard` field of every IDENTIFY, in order (`[0, 1]` when the client sent none). */
  readonly identifiedShards: Array<[number, number]> = [];
  /** While set, IDENTIFY is answered only by `releaseIdentify()`. */
  private identifyHeld = false;
  private heldIdentify: WebSocket | undefined;
  /** The next N history reads answer 429 with this `retry_after` (seconds). */
  private historyRateLimits: number[] = [];
  /** How many 429s the history route has sent. */
  historyRateLimited = 0;

  constructor(options: FakeDiscordOptions = {}) {
    this.heartbeatIntervalMs = options.heartbeatIntervalMs ?? 41_250;
    this.echoBotMessages = options.echoBotMessages ?? true;
    this.users.set(FAKE_BOT_ID, { id: FAKE_BOT_ID, username: 'magpie', bot: true });
    for (const user of options.users ?? []) this.users.set(user.id, user);
    for (const channel of options.channels ?? []) this.channels.set(channel.id, channel);
    this.roles = options.roles ?? [];
    this.shardCount = options.shards ?? 1;
    this.extraGuilds = options.guilds ?? [];
    this.requestedPort = options.port ?? 0;
    this.rejectToken = options.rejectToken ?? false;
    this.disallowIntents = options.disallowIntents ?? false;
    this.server = createServer((request, response) => void this.handleHttp(request, response));
    this.wss = new WebSocketServer({ server: this.server, path: '/gateway' });
    this.wss.on('connection', (socket) => this.handleConnection(socket));
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.requestedPort, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** What discord.js takes as `rest: { api }`. */
  get restApi(): string {
    return `http://127.0.0.1:${this.port}/api`;
  }

  get gatewayUrl(): string {
    return `ws://127.0.0.1:${this.port}/gateway`;
  }

  get connected(): boolean {
    return this.socket !== undefined && this.authenticated;
  }

  /**
   * What a bot message shows now: its content after the bot's edits, or undefined once the bot
   * removed it.
   */
  contentOf(messageId: string): string | undefined {
    const message = this.messages.get(messageId);
    return message ? String(message.content ?? '') : undefined;
  }

  /**
   * The bot's messages in a channel as they stand now (after edits, without removed ones), in
   * the order they were posted.
   */
  visibleReplies(channelId: string): Array<{ id: string; content: string }> {
    return this.posted
      .filter((message) => message.channelId === channelId && this.messages.has(message.id))
      .map((message) => ({ id: message.id, content: this.contentOf(message.id)! }));
  }

  addUser(user: FakeUser): void {
    this.users.set(user.id, user);
  }

  addChannel(channel: FakeChannel): void {
    this.channels.set(channel.id, channel);
  }

  /** A fresh snowflake whose timestamp is now. */
  nextId(): string {
    this.idCounter += 1n;
    return (((BigInt(Date.now()) - DISCORD_EPOCH) << 22n) | (this.idCounter & 0x3fffffn)).toString();
  }

  /** Resolves once a client has identified (or resumed) and received READY (or RESUMED). */
  waitForReady(timeoutMs = 5_000): Promise<void> {
    if (this.connected) return Promise.resolve();
    return withTimeout(
      new Promise<void>((resolve) => this.readyWaiters.add(resolve)),
      timeoutMs,
      'gateway session',
    );
  }

  /** The next posted message matching the predicate (already posted ones count). */
  waitForPost(predicate: (message: PostedMessage) => boolean, options: { timeoutMs?: number } = {}): Promise<PostedMessage> {
    const existing = this.posted.find(predicate);
    if (existing) return Promise.resolve(existing);
    return waitOn(this.postWaiters, predicate, options.timeoutMs ?? 5_000, 'posted message');
  }

  waitForInteractionReply(
    predicate: (reply: InteractionReply) => boolean,
    options: { timeoutMs?: number } = {},
  ): Promise<InteractionReply> {
    const existing = this.interactionReplies.find(predicate);
    if (existing) return Promise.resolve(existing);
    return waitOn(this.interactionWaiters, predicate, options.timeoutMs ?? 5_000, 'interaction reply');
  }

  /** IDENTIFY waits until `releaseIdentify()`: the bot stays connected but not ready. */
  holdIdentify(): void {
    this.identifyHeld = true;
  }

  releaseIdentify(): void {
    this.identifyHeld = false;
    const socket = this.heldIdentify;
    this.heldIdentify = undefined;
    if (!socket || socket.readyState !== socket.OPEN) return;
    this.claimShardZero(socket);
    this.identify(socket);
  }

  /**
   * Past messages of a channel, as if written before the bot was there: stored for
   * GET /channels/:id/messages, not dispatched. `at` (ms) sets the time inside each snowflake,
   * so ids sort like the messages; default: one minute apart ending a day ago. Returns the ids.
   */
  seedHistory(channelId: string, messages: Array<{ authorId: string; content: string; at?: number }>): string[] {
    const channel = this.requireChannel(channelId);
    const guildId = this.guildOf(channel);
    const start = Date.now() - 86_400_000 - messages.length * 60_000;
    return messages.map((message, index) => {
      const at = message.at ?? start + index * 60_000;
      this.idCounter += 1n;
      const id = (((BigInt(at) - DISCORD_EPOCH) << 22n) | (this.idCounter & 0x3fffffn)).toString();
      const author = this.requireUser(message.authorId);
      this.messages.set(id, {
        id,
        channel_id: channel.id,
        author: this.userPayload(author),
        content: message.content,
        timestamp: new Date(at).toISOString(),
        ...plainMessageFields(),
        ...(guildId ? { guild_id: guildId } : {}),
      });
      return id;
    });
  }

  /** The next `count` reads of a channel's history answer 429, asking to retry after `retryAfterSeconds`. */
  rateLimitHistory(count: number, retryAfterSeconds: number): void {
    for (let index = 0; index < count; index += 1) this.historyRateLimits.push(retryAfterSeconds);
  }

  /** The next N POSTs of messages fail with this HTTP status. */
  failPosts(status: number, count = 1): void {
    for (let index = 0; index < count; index += 1) this.failNextPosts.push(status);
  }

  /** A user writes in a channel; returns the new message's id. */
  sendMessage(options: SendMessageOptions): string {
    const channel = this.requireChannel(options.channelId);
    const author = this.requireUser(options.authorId);
    const id = this.nextId();
    const mentionIds = [...(options.mentionUserIds ?? [])];
    let content = options.content;
    if (options.mentionsBot) {
      mentionIds.push(FAKE_BOT_ID);
      content = `<@${FAKE_BOT_ID}> ${content}`;
    }
    const guildId = this.guildOf(channel);
    const payload: Record<string, unknown> = {
      id,
      channel_id: channel.id,
      author: this.userPayload(author),
      content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions: mentionIds.map((userId) => this.mentionPayload(this.requireUser(userId), guildId)),
      mention_roles: options.mentionRoleIds ?? [],
      attachments: (options.attachments ?? []).map((attachment) => {
        const attachmentId = this.nextId();
        let url = `https://cdn.invalid/${attachment.filename}`;
        let size = attachment.size ?? 1024;
        if (attachment.data !== undefined) {
          const data = Buffer.isBuffer(attachment.data) ? attachment.data : Buffer.from(attachment.data, 'utf8');
          const filePath = `/cdn/attachments/${attachmentId}/${encodeURIComponent(attachment.filename)}`;
          this.files.set(filePath, { data, contentType: attachment.contentType ?? 'application/octet-stream' });
          url = `http://127.0.0.1:${this.port}${filePath}`;
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
      payload.member = this.memberPayload(author);
    } else {
      payload.channel_type = 1;
    }
    if (options.replyToMessageId) {
      const referenced = this.messages.get(options.replyToMessageId);
      payload.type = 19;
      payload.message_reference = {
        message_id: options.replyToMessageId,
        channel_id: channel.id,
        ...(guildId ? { guild_id: guildId } : {}),
      };
      payload.referenced_message = referenced ?? null;
      const referencedAuthor = (referenced?.author as { id?: string } | undefined)?.id;
      if (referencedAuthor && !mentionIds.includes(referencedAuthor)) {
        (payload.mentions as unknown[]).push(this.mentionPayload(this.requireUser(referencedAuthor), guildId));
      }
    }
    this.messages.set(id, payload);
    this.dispatch('MESSAGE_CREATE', payload);
    return id;
  }

  editMessage(options: { messageId: string; content: string }): void {
    const original = this.messages.get(options.messageId);
    if (!original) throw new Error(`fake discord: no message ${options.messageId}`);
    const updated = { ...original, content: options.content, edited_timestamp: new Date().toISOString() };
    this.messages.set(options.messageId, updated);
    this.dispatch('MESSAGE_UPDATE', updated);
  }

  deleteMessage(options: { channelId: string; messageId: string }): void {
    const channel = this.requireChannel(options.channelId);
    const guildId = this.guildOf(channel);
    this.messages.delete(options.messageId);
    this.dispatch('MESSAGE_DELETE', {
      id: options.messageId,
      channel_id: channel.id,
      ...(guildId ? { guild_id: guildId } : {}),
    });
  }

  bulkDelete(options: { channelId: string; messageIds: string[] }): void {
    const channel = this.requireChannel(options.channelId);
    const guildId = this.guildOf(channel);
    for (const id of options.messageIds) this.messages.delete(id);
    this.dispatch('MESSAGE_DELETE_BULK', {
      ids: options.messageIds,
      channel_id: channel.id,
      ...(guildId ? { guild_id: guildId } : {}),
    });
  }

  /** A slash command invocation; returns the interaction id. */
  sendInteraction(options: SendInteractionOptions): { id: string; token: string } {
    const channel = this.requireChannel(options.channelId);
    const user = this.requireUser(options.userId);
    const guildId = this.guildOf(channel);
    const id = this.nextId();
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
      ? { ...this.memberPayload(user), user: this.userPayload(user), permissions: options.permissions ?? '0' }
      : undefined;
    this.dispatch('INTERACTION_CREATE', {
      id,
      application_id: FAKE_BOT_ID,
      type: 2,
      token,
      version: 1,
      channel_id: channel.id,
      channel: { id: channel.id, type: channel.type, name: channel.name },
      ...(guildId ? { guild_id: guildId, member, guild_locale: 'en-US' } : { user: this.userPayload(user) }),
      app_permissions: '0',
      locale: 'en-US',
      entitlements: [],
      authorizing_integration_owners: {},
      context: guildId ? 0 : 1,
      data: { id: this.nextId(), name: options.name, type: 1, options: commandOptions },
    });
    return { id, token };
  }

  /** Replaces a channel's permission overwrites and tells the bot (CHANNEL_UPDATE). */
  setOverwrites(channelId: string, overwrites: FakeOverwrite[]): void {
    const channel = this.requireChannel(channelId);
    channel.overwrites = overwrites;
    this.dispatch('CHANNEL_UPDATE', this.channelPayload(channel));
}

  /** The shard Discord sends a guild's events to. */
  shardOfGuild(guildId: string): number {
    return Number((BigInt(guildId) >> 22n) % BigInt(this.shardCount));
  }

  /** Shard sessions (other than 0) that have identified and are connected. */
  get connectedShards(): number[] {
    return [...this.shardSessions.entries()].filter(([, session]) => session.authenticated).map(([id]) => id);
  }

  /** A raw dispatch, for events the helpers above do not cover (malformed ones too). */
  dispatch(type: string, data: unknown): number {
    const guildId = (data as { guild_id?: unknown } | null)?.guild_id;
    const shard = this.shardCount > 1 && typeof guildId === 'string' && /^\d+$/.test(guildId) ? this.shardOfGuild(guildId) : 0;
    if (shard !== 0) return this.dispatchToShard(shard, type, data);
    this.sequence += 1;
    const entry = { s: this.sequence, t: type, d: data };
    this.dispatchLog.push(entry);
    if (this.socket && this.authenticated) this.send({ op: 0, ...entry });
    return this.sequence;
  }

  /**
   * Cuts the connection abruptly (like a network failure). Dispatches sent meanwhile are
   * replayed when the client resumes.
   */
  dropConnection(): void {
    this.authenticated = false;
    this.socket?.terminate();
    this.socket = undefined;
  }

  /**
   * Drops the connection and forgets the session, as after an outage too long to resume: the
   * client's RESUME is answered with INVALID_SESSION (not resumable), it identifies again, and
   * events dispatched meanwhile are never replayed (only REST history has them).
   */
  dropSession(): void {
    this.sessionId = '';
    this.dropConnection();
  }

  async close(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    this.socket = undefined;
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // --- gateway ---------------------------------------------------------------------------

  private handleConnection(socket: WebSocket): void {
    if (this.shardCount === 1) {
      // A new connection replaces the old one; Discord allows one per session.
      this.socket?.terminate();
      this.socket = socket;
      this.authenticated = false;
    }
    // Sharded: which session a connection is for is known at its IDENTIFY or RESUME.
    socket.on('message', (raw) => this.handleGatewayPayload(socket, raw.toString()));
    socket.on('close', () => {
      if (this.socket === socket) {
        this.socket = undefined;
        this.authenticated = false;
      }
    });
    this.sendTo(socket, { op: 10, d: { heartbeat_interval: this.heartbeatIntervalMs }, s: null, t: null });
  }

  private handleGatewayPayload(socket: WebSocket, text: string): void {
    let payload: { op: number; d: any };
    try {
      payload = JSON.parse(text);
    } catch {
      socket.close(4002, 'decode error');
      return;
    }
    switch (payload.op) {
      case 1:
        this.heartbeats += 1;
        this.sendTo(socket, { op: 11, d: null, s: null, t: null });
        return;
      case 2: {
        this.handshakes.push(payload);
        if (this.disallowIntents) {
          socket.close(4014, 'Disallowed intent(s).');
          return;
        }
        if (this.identifyHeld) {
          this.heldIdentify = socket;
          return;
        }
        const shard = Array.isArray(payload.d?.shard) ? (payload.d.shard as [number, number]) : ([0, 1] as [number, number]);
        this.identifiedShards.push(shard);
        if (this.shardCount > 1 && shard[1] !== this.shardCount) {
          socket.close(4010, 'invalid shard');
          return;
        }
        if (shard[0] !== 0) {
          this.identifyShard(socket, shard[0]);
          return;
        }
        this.claimShardZero(socket);
        this.identify(socket);
        return;
      }
      case 6: {
        this.handshakes.push(payload);
        const other = [...this.shardSessions.entries()].find(([, session]) => session.sessionId === payload.d?.session_id);
        if (other) {
          other[1].socket.terminate();
          other[1].socket = socket;
          other[1].authenticated = true;
          this.sendTo(socket, { op: 0, s: ++other[1].sequence, t: 'RESUMED', d: {} });
          return;
        }
        this.claimShardZero(socket);
        this.resume(socket, payload.d);
        return;
      }
      default:
        // Presence updates, member requests, voice: accepted and ignored.
        return;
    }
  }

  private identify(socket: WebSocket): void {
    this.sessionId = `session-${this.nextId()}`;
    this.sequence = 0;
    this.dispatchLog = [];
    this.authenticated = true;
    this.dispatch('READY', {
      v: 10,
      user: this.userPayload(this.requireUser(FAKE_BOT_ID)),
      guilds: this.guildIdsOfShard(0).map((id) => ({ id, unavailable: true })),
      session_id: this.sessionId,
      resume_gateway_url: this.gatewayUrl,
      shard: [0, this.shardCount],
      application: { id: FAKE_BOT_ID, flags: 0 },
      private_channels: [],
      relationships: [],
      user_settings: {},
      presences: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
    });
    for (const guildId of this.guildIdsOfShard(0)) this.dispatch('GUILD_CREATE', this.guildPayload(guildId));
    void socket;
    this.notifyReady();
  }

  /** Shard 0's session moves to this socket (sharded mode defers it to the handshake). */
  private claimShardZero(socket: WebSocket): void {
    if (this.socket === socket) return;
    this.socket?.terminate();
    this.socket = socket;
    this.authenticated = false;
  }

  /** Guilds whose events go to this shard (all of them when unsharded). */
  private guildIdsOfShard(shard: number): string[] {
    const all = [FAKE_GUILD_ID, ...this.extraGuilds.map((guild) => guild.id)];
    return this.shardCount === 1 ? all : all.filter((id) => this.shardOfGuild(id) === shard);
  }

  private identifyShard(socket: WebSocket, shard: number): void {
    this.shardSessions.get(shard)?.socket.terminate();
    const session: ShardSession = { socket, sessionId: `session-${this.nextId()}`, sequence: 0, authenticated: true };
    this.shardSessions.set(shard, session);
    socket.on('close', () => {
      if (this.shardSessions.get(shard)?.socket === socket) session.authenticated = false;
    });
    const guildIds = this.guildIdsOfShard(shard);
    this.dispatchToShard(shard, 'READY', {
      v: 10,
      user: this.userPayload(this.requireUser(FAKE_BOT_ID)),
      guilds: guildIds.map((id) => ({ id, unavailable: true })),
      session_id: session.sessionId,
      resume_gateway_url: this.gatewayUrl,
      shard: [shard, this.shardCount],
      application: { id: FAKE_BOT_ID, flags: 0 },
      private_channels: [],
      relationships: [],
      user_settings: {},
      presences: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
    });
    for (const guildId of guildIds) this.dispatchToShard(shard, 'GUILD_CREATE', this.guildPayload(guildId));
  }

  /** A dispatch on a shard other than 0 (not kept for replay: those sessions do not resume here). */
  private dispatchToShard(shard: number, type: string, data: unknown): number {
    const session = this.shardSessions.get(shard);
    if (!session) return 0;
    session.sequence += 1;
    if (session.authenticated) this.sendTo(session.socket, { op: 0, s: session.sequence, t: type, d: data });
    return session.sequence;
  }

  private resume(socket: WebSocket, data: { session_id?: string; seq?: number }): void {
    if (data.session_id !== this.sessionId) {
      // Unknown session: not resumable, the client identifies again.
      this.sendTo(socket, { op: 9, d: false, s: null, t: null });
      return;
    }
    this.authenticated = true;
    const since = data.seq ?? 0;
    for (const entry of this.dispatchLog) {
      if (entry.s > since) this.sendTo(socket, { op: 0, ...entry });
    }
    this.dispatch('RESUMED', {});
    this.notifyReady();
  }

  private notifyReady(): void {
    for (const resolve of this.readyWaiters) resolve();
    this.readyWaiters.clear();
  }

  private send(payload: unknown): void {
    if (this.socket) this.sendTo(this.socket, payload);
  }

  private sendTo(socket: WebSocket, payload: unknown): void {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(payload));
  }

  // --- REST ------------------------------------------------------------------------------

  private async handleHttp(request: HttpRequest, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown = undefined;
    if (text.length > 0) {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const path = url.pathname.replace(/^\/api\/v\d+/, '');
    const method = request.method ?? 'GET';
    this.requests.push({ method, path, body, at: Date.now() });
    const reply = (status: number, json?: unknown): void => {
      if (json === undefined) {
        response.writeHead(status).end();
        return;
      }
      response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(json));
    };
    let match: RegExpMatchArray | null;

    if (this.rejectToken && path.startsWith('/') && !url.pathname.startsWith('/cdn/')) {
      return reply(401, { message: '401: Unauthorized', code: 0 });
    }
    if (method === 'GET' && path === '/gateway/bot') {
      return reply(200, {
        url: this.gatewayUrl,
        shards: this.shardCount,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 },
      });
    }
    if (method === 'GET' && path === '/users/@me') {
      return reply(200, this.userPayload(this.requireUser(FAKE_BOT_ID)));
    }
    if (method === 'GET' && url.pathname.startsWith('/cdn/')) {
      const file = this.files.get(url.pathname);
      if (!file) return reply(404, { message: 'no such file' });
      const name = decodeURIComponent(url.pathname.split('/').at(-1) ?? '');
      this.downloads.set(name, (this.downloads.get(name) ?? 0) + 1);
      response.writeHead(200, { 'content-type': file.contentType, 'content-length': file.data.length }).end(file.data);
      return;
    }
    if ((method === 'PATCH' || method === 'DELETE') && (match = path.match(/^\/channels\/(\d+)\/messages\/(\d+)$/))) {
      const existing = this.messages.get(match[2]!);
      if (!existing) return reply(404, { message: 'Unknown Message', code: 10008 });
      const payload = (body ?? {}) as { content?: string };
      if (method === 'DELETE') {
        this.edits.push({ channelId: match[1]!, messageId: match[2]!, kind: 'delete', at: Date.now() });
        this.messages.delete(match[2]!);
        return reply(204);
      }
      const updated = { ...existing, content: payload.content ?? existing.content, edited_timestamp: new Date().toISOString() };
      this.messages.set(match[2]!, updated);
      this.edits.push({ channelId: match[1]!, messageId: match[2]!, content: payload.content, kind: 'edit', at: Date.now() });
      return reply(200, updated);
    }
    if (method === 'POST' && (match = path.match(/^\/channels\/(\d+)\/typing$/))) {
      this.typing.push(match[1]!);
      this.typingAt.push(Date.now());
      return reply(204);
    }
    if (method === 'POST' && (match = path.match(/^\/channels\/(\d+)\/messages$/))) {
      const failure = this.failNextPosts.shift();
      if (failure !== undefined) return reply(failure, { message: 'Injected failure', code: 0 });
      return reply(200, this.recordPost(match[1]!, body as Record<string, any>));
    }
    if (method === 'PUT' && (match = path.match(/^\/applications\/(\d+)(?:\/guilds\/(\d+))?\/commands$/))) {
      const commands = Array.isArray(body) ? body : [];
      this.registeredCommands.push({ scope: match[2] ?? 'global', commands });
      return reply(
        200,
        commands.map((command: Record<string, unknown>) => ({
          ...command,
          id: this.nextId(),
          application_id: match![1],
          version: this.nextId(),
          default_member_permissions: command.default_member_permissions ?? null,
          type: command.type ?? 1,
        })),
      );
    }
    if (method === 'POST' && (match = path.match(/^\/interactions\/(\d+)\/([^/]+)\/callback$/))) {
      const payload = (body ?? {}) as { type?: number; data?: { content?: string; flags?: number } };
      this.recordInteractionReply({
        interactionId: match[1]!,
        token: match[2]!,
        kind: 'callback',
        type: payload.type,
        content: payload.data?.content,
        flags: payload.data?.flags,
      });
      if (url.searchParams.get('with_response') === 'true') {
        return reply(200, { interaction: { id: match[1], type: 2 }, resource: { type: payload.type } });
      }
      return reply(204);
    }
    if ((match = path.match(/^\/webhooks\/(\d+)\/([^/]+)(\/messages\/@original)?$/))) {
      const payload = (body ?? {}) as { content?: string; flags?: number };
      const kind = match[3] ? 'edit' : 'followup';
      if (method === 'DELETE') return reply(204);
      this.recordInteractionReply({ token: match[2]!, kind, content: payload.content, flags: payload.flags });
      return reply(200, this.messagePayload({ id: this.nextId(), channelId: '0', content: payload.content ?? '' }));
    }
    if (method === 'GET' && (match = path.match(/^\/channels\/(\d+)$/))) {
      const channel = this.channels.get(match[1]!);
      if (!channel) return reply(404, { message: 'Unknown Channel', code: 10003 });
      return reply(200, this.channelPayload(channel));
    }
    if (method === 'GET' && (match = path.match(/^\/channels\/(\d+)\/messages$/))) {
      const retryAfter = this.historyRateLimits.shift();
      if (retryAfter !== undefined) {
        this.historyRateLimited += 1;
        response.writeHead(429, {
          'content-type': 'application/json',
          'retry-after': String(retryAfter),
          'x-ratelimit-scope': 'user',
        });
        response.end(JSON.stringify({ message: 'You are being rate limited.', retry_after: retryAfter, global: false }));
        return;
      }
      if (!this.channels.has(match[1]!)) return reply(404, { message: 'Unknown Channel', code: 10003 });
      return reply(200, this.channelHistory(match[1]!, url.searchParams));
    }
    if (method === 'GET' && (match = path.match(/^\/channels\/(\d+)\/messages\/(\d+)$/))) {
      const message = this.messages.get(match[2]!);
      if (!message) return reply(404, { message: 'Unknown Message', code: 10008 });
      return reply(200, message);
    }
    return reply(404, { message: `fake discord: no route for ${method} ${path}`, code: 0 });
  }

  /**
   * GET /channels/:id/messages as Discord answers it: `limit` (1-100, default 50) messages,
   * newest first; with `after`, the oldest ones after that id; with `before`, the newest before it;
   * with `around`, about half before the id and the rest from it on (the id itself if it exists).
   */
  private channelHistory(channelId: string, query: URLSearchParams): Array<Record<string, unknown>> {
    this.historyRequests.push({
      channelId,
      after: query.get('after') ?? undefined,
      before: query.get('before') ?? undefined,
      around: query.get('around') ?? undefined,
    });
    const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 50) || 50));
    const after = query.get('after');
    const before = query.get('before');
    const around = query.get('around');
    const inChannel = [...this.messages.values()]
      .filter((message) => message.channel_id === channelId)
      .sort((left, right) => (BigInt(left.id as string) < BigInt(right.id as string) ? -1 : 1));
    if (around !== null) {
      const pivot = BigInt(around);
      const older = inChannel.filter((message) => BigInt(message.id as string) < pivot);
      const rest = inChannel.filter((message) => BigInt(message.id as string) >= pivot);
      const below = Math.floor(limit / 2);
      return [...older.slice(Math.max(0, older.length - below)), ...rest.slice(0, limit - Math.min(below, older.length))].reverse();
    }
    if (after !== null) {
      return inChannel.filter((message) => BigInt(message.id as string) > BigInt(after)).slice(0, limit).reverse();
    }
    const older = before === null ? inChannel : inChannel.filter((message) => BigInt(message.id as string) < BigInt(before));
    return older.slice(-limit).reverse();
  }

  private recordPost(channelId: string, body: Record<string, any>): Record<string, unknown> {
    const id = this.nextId();
    const posted: PostedMessage = {
      id,
      channelId,
      content: typeof body?.content === 'string' ? body.content : '',
      messageReference: body?.message_reference,
      allowedMentions: body?.allowed_mentions,
      flags: body?.flags,
      at: Date.now(),
    };
    const payload = this.messagePayload({
      id,
      channelId,
      content: posted.content,
      referenceId: posted.messageReference?.message_id,
    });
    this.messages.set(id, payload);
    this.posted.push(posted);
    for (const waiter of [...this.postWaiters]) {
      if (waiter.predicate(posted)) {
        this.postWaiters.delete(waiter);
        waiter.resolve(posted);
      }
    }
    if (this.echoBotMessages && this.channels.has(channelId)) this.dispatch('MESSAGE_CREATE', payload);
    return payload;
  }

  private recordInteractionReply(reply: InteractionReply): void {
    this.interactionReplies.push(reply);
    for (const waiter of [...this.interactionWaiters]) {
      if (waiter.predicate(reply)) {
        this.interactionWaiters.delete(waiter);
        waiter.resolve(reply);
      }
    }
  }

  // --- payload builders ------------------------------------------------------------------

  private messagePayload(options: { id: string; channelId: string; content: string; referenceId?: string }): Record<string, unknown> {
    const channel = this.channels.get(options.channelId);
    const guildId = channel ? this.guildOf(channel) : undefined;
    const bot = this.requireUser(FAKE_BOT_ID);
    return {
      id: options.id,
      channel_id: options.channelId,
      author: this.userPayload(bot),
      content: options.content,
      timestamp: new Date().toISOString(),
      ...plainMessageFields(),
      type: options.referenceId ? 19 : 0,
      ...(guildId ? { guild_id: guildId, member: this.memberPayload(bot) } : { channel_type: 1 }),
      ...(options.referenceId
        ? {
            message_reference: { message_id: options.referenceId, channel_id: options.channelId },
            referenced_message: this.messages.get(options.referenceId) ?? null,
          }
        : {}),
    };
  }

  private guildPayload(guildId: string = FAKE_GUILD_ID): Record<string, unknown> {
    // The default guild keeps every guild channel, as it always has, unless other guilds are declared.
    const guildChannels = [...this.channels.values()].filter(
      (channel) => channel.type !== 1 && (this.extraGuilds.length === 0 || this.guildOf(channel) === guildId),
    );
    const joinedAt = new Date(0).toISOString();
    return {
      id: guildId,
      name: this.extraGuilds.find((guild) => guild.id === guildId)?.name ?? 'Fake Guild',
      icon: null,
      splash: null,
      discovery_splash: null,
      owner_id: [...this.users.values()].find((user) => !user.bot)?.id ?? FAKE_BOT_ID,
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
      member_count: this.users.size,
      roles: [
        { id: guildId, name: '@everyone', permissions: '1024', position: 0, color: 0, hoist: false, managed: false, mentionable: false, flags: 0 },
        ...this.roles.map((role, index) => ({
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
      channels: guildChannels.filter((channel) => channel.type === 0).map((channel) => this.channelPayload(channel)),
      threads: guildChannels.filter((channel) => channel.type === 11 || channel.type === 12).map((channel) => this.channelPayload(channel)),
      members: [...this.users.values()].filter((user) => user.roles !== undefined || user.id === FAKE_BOT_ID || !user.bot).map((user) => ({
        ...this.memberPayload(user),
        user: this.userPayload(user),
      })),
      presences: [],
      voice_states: [],
      stage_instances: [],
      guild_scheduled_events: [],
      soundboard_sounds: [],
    };
  }

  private channelPayload(channel: FakeChannel): Record<string, unknown> {
    if (channel.type === 1) {
      return { id: channel.id, type: 1, recipients: [], last_message_id: null };
    }
    const base = {
      id: channel.id,
      type: channel.type,
      name: channel.name,
      guild_id: this.guildOf(channel) ?? FAKE_GUILD_ID,
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

  private userPayload(user: FakeUser): Record<string, unknown> {
    return {
      id: user.id,
      username: user.username,
      global_name: user.globalName ?? null,
      discriminator: '0',
      avatar: null,
      bot: user.bot ?? false,
    };
  }

  private memberPayload(user: FakeUser): Record<string, unknown> {
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

  private mentionPayload(user: FakeUser, guildId: string | undefined): Record<string, unknown> {
    return guildId ? { ...this.userPayload(user), member: this.memberPayload(user) } : this.userPayload(user);
  }

  private guildOf(channel: FakeChannel): string | undefined {
    return channel.type === 1 ? undefined : (channel.guildId ?? FAKE_GUILD_ID);
  }

  private requireUser(id: string): FakeUser {
    const user = this.users.get(id);
    if (!user) throw new Error(`fake discord: no user ${id}`);
    return user;
  }

  private requireChannel(id: string): FakeChannel {
    const channel = this.channels.get(id);
    if (!channel) throw new Error(`fake discord: no channel ${id}`);
    return channel;
  }
}

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const fake = new FakeDiscord(options);
  await fake.listen();
  return fake;
}

function waitOn<T>(waiters: Set<Waiter<T>>, predicate: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  let waiter: Waiter<T>;
  const promise = new Promise<T>((resolve) => {
    waiter = { predicate, resolve };
    waiters.add(waiter);
  });
  return withTimeout(promise, timeoutMs, what).finally(() => waiters.delete(waiter));
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`fake discord: timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The fields of a message with no mentions, files or embeds (fresh arrays for each message). */
function plainMessageFields(): Record<string, unknown> {
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
