/**
 * A small Discord on loopback: the gateway WebSocket (HELLO, IDENTIFY → READY + GUILD_CREATE,
 * heartbeats, RESUME with replay of missed events) and the REST routes the bot uses. The real
 * discord.js client connects to it with `rest: { api: fake.restApi }` and nothing patched.
 * Everything the bot sends is recorded so tests can assert on it.
 *
 * This class only composes the parts (state, gateway, REST, user events, records) on one HTTP
 * server and gives tests one object to drive and read.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { FakeGateway } from './gateway.js';
import { seedHistory } from './history.js';
import { BotRecords } from './records.js';
import { FakeRest } from './rest.js';
import { DiscordState } from './state.js';
import type {
  FakeChannel,
  FakeDiscordOptions,
  FakeOverwrite,
  FakeUser,
  InteractionReply,
  MessageEdit,
  PostedMessage,
  RecordedRequest,
  SendInteractionOptions,
  SendMessageOptions,
} from './types.js';
import { UserEvents } from './user-events.js';

export class FakeDiscord {
  // The records below are the parts' own arrays and maps, shared, so tests read them live.
  readonly requests: RecordedRequest[];
  readonly posted: PostedMessage[];
  readonly typing: string[];
  /** When each typing request came (ms since the epoch), parallel to `typing`. */
  readonly typingAt: number[];
  /** The bot's PATCH and DELETE requests on its messages, in order, with timestamps. */
  readonly edits: MessageEdit[];
  /** How many times each CDN file was downloaded, by file name. */
  readonly downloads: Map<string, number>;
  readonly interactionReplies: InteractionReply[];
  readonly registeredCommands: Array<{ scope: string; commands: unknown[] }>;
  /** IDENTIFY and RESUME payloads received, in order. */
  readonly handshakes: Array<{ op: number; d: unknown }>;
  /** GET /channels/:id/messages requests received (catch-up), in order. */
  readonly historyRequests: Array<{ channelId: string; after?: string; before?: string; around?: string }>;
  /** The `shard` field of every IDENTIFY, in order (`[0, 1]` when the client sent none). */
  readonly identifiedShards: Array<[number, number]>;

  private readonly state: DiscordState;
  private readonly records = new BotRecords();
  private readonly server: Server;
  private readonly gateway: FakeGateway;
  private readonly rest: FakeRest;
  private readonly userEvents: UserEvents;
  private port = 0;
  private readonly requestedPort: number;

  constructor(options: FakeDiscordOptions = {}) {
    this.state = new DiscordState(options);
    this.requestedPort = options.port ?? 0;
    this.server = createServer((request, response) => void this.rest.handle(request, response));
    this.gateway = new FakeGateway({
      server: this.server,
      state: this.state,
      gatewayUrl: () => this.gatewayUrl,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? 41_250,
      shards: options.shards ?? 1,
      disallowIntents: options.disallowIntents ?? false,
    });
    this.rest = new FakeRest({
      state: this.state,
      records: this.records,
      gateway: this.gateway,
      gatewayUrl: () => this.gatewayUrl,
      echoBotMessages: options.echoBotMessages ?? true,
      rejectToken: options.rejectToken ?? false,
    });
    this.userEvents = new UserEvents(this.state, this.gateway, () => `http://127.0.0.1:${this.port}`);
    this.requests = this.records.requests;
    this.posted = this.records.posted;
    this.typing = this.records.typing;
    this.typingAt = this.records.typingAt;
    this.edits = this.records.edits;
    this.downloads = this.records.downloads;
    this.interactionReplies = this.records.interactionReplies;
    this.registeredCommands = this.records.registeredCommands;
    this.historyRequests = this.records.historyRequests;
    this.handshakes = this.gateway.handshakes;
    this.identifiedShards = this.gateway.identifiedShards;
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
    return this.gateway.connected;
  }

  /** Heartbeats the gateway has acknowledged. */
  get heartbeats(): number {
    return this.gateway.heartbeats;
  }

  /** How many 429s the history route has sent. */
  get historyRateLimited(): number {
    return this.rest.historyRateLimited;
  }

  /**
   * What a bot message shows now: its content after the bot's edits, or undefined once the bot
   * removed it.
   */
  contentOf(messageId: string): string | undefined {
    const message = this.state.messages.get(messageId);
    return message ? String(message.content ?? '') : undefined;
  }

  /**
   * The bot's messages in a channel as they stand now (after edits, without removed ones), in
   * the order they were posted.
   */
  visibleReplies(channelId: string): Array<{ id: string; content: string }> {
    return this.posted
      .filter((message) => message.channelId === channelId && this.state.messages.has(message.id))
      .map((message) => ({ id: message.id, content: this.contentOf(message.id)! }));
  }

  addUser(user: FakeUser): void {
    this.state.users.set(user.id, user);
  }

  addChannel(channel: FakeChannel): void {
    this.state.channels.set(channel.id, channel);
  }

  /** A fresh snowflake whose timestamp is now. */
  nextId(): string {
    return this.state.nextId();
  }

  /** Resolves once a client has identified (or resumed) and received READY (or RESUMED). */
  waitForReady(timeoutMs = 5_000): Promise<void> {
    return this.gateway.waitForReady(timeoutMs);
  }

  /** The next posted message matching the predicate (already posted ones count). */
  waitForPost(predicate: (message: PostedMessage) => boolean, options: { timeoutMs?: number } = {}): Promise<PostedMessage> {
    return this.records.waitForPost(predicate, options);
  }

  waitForInteractionReply(
    predicate: (reply: InteractionReply) => boolean,
    options: { timeoutMs?: number } = {},
  ): Promise<InteractionReply> {
    return this.records.waitForInteractionReply(predicate, options);
  }

  /** IDENTIFY waits until `releaseIdentify()`: the bot stays connected but not ready. */
  holdIdentify(): void {
    this.gateway.holdIdentify();
  }

  releaseIdentify(): void {
    this.gateway.releaseIdentify();
  }

  /**
   * Past messages of a channel, as if written before the bot was there: stored for
   * GET /channels/:id/messages, not dispatched. `at` (ms) sets the time inside each snowflake,
   * so ids sort like the messages; default: one minute apart ending a day ago. Returns the ids.
   */
  seedHistory(channelId: string, messages: Array<{ authorId: string; content: string; at?: number }>): string[] {
    return seedHistory(this.state, channelId, messages);
  }

  /** The next `count` reads of a channel's history answer 429, asking to retry after `retryAfterSeconds`. */
  rateLimitHistory(count: number, retryAfterSeconds: number): void {
    this.rest.rateLimitHistory(count, retryAfterSeconds);
  }

  /** The next N POSTs of messages fail with this HTTP status. */
  failPosts(status: number, count = 1): void {
    this.rest.failPosts(status, count);
  }

  /** A user writes in a channel; returns the new message's id. */
  sendMessage(options: SendMessageOptions): string {
    return this.userEvents.sendMessage(options);
  }

  editMessage(options: { messageId: string; content: string }): void {
    this.userEvents.editMessage(options);
  }

  deleteMessage(options: { channelId: string; messageId: string }): void {
    this.userEvents.deleteMessage(options);
  }

  bulkDelete(options: { channelId: string; messageIds: string[] }): void {
    this.userEvents.bulkDelete(options);
  }

  /** A slash command invocation; returns the interaction id. */
  sendInteraction(options: SendInteractionOptions): { id: string; token: string } {
    return this.userEvents.sendInteraction(options);
  }

  /** Replaces a channel's permission overwrites and tells the bot (CHANNEL_UPDATE). */
  setOverwrites(channelId: string, overwrites: FakeOverwrite[]): void {
    this.userEvents.setOverwrites(channelId, overwrites);
  }

  /** The shard Discord sends a guild's events to. */
  shardOfGuild(guildId: string): number {
    return this.gateway.shardOfGuild(guildId);
  }

  /** Shard sessions (other than 0) that have identified and are connected. */
  get connectedShards(): number[] {
    return this.gateway.connectedShards;
  }

  /** A raw dispatch, for events the helpers above do not cover (malformed ones too). */
  dispatch(type: string, data: unknown): number {
    return this.gateway.dispatch(type, data);
  }

  /**
   * Cuts the connection abruptly (like a network failure). Dispatches sent meanwhile are
   * replayed when the client resumes.
   */
  dropConnection(): void {
    this.gateway.dropConnection();
  }

  /**
   * Drops the connection and forgets the session, as after an outage too long to resume: the
   * client's RESUME is answered with INVALID_SESSION (not resumable), it identifies again, and
   * events dispatched meanwhile are never replayed (only REST history has them).
   */
  dropSession(): void {
    this.gateway.dropSession();
  }

  async close(): Promise<void> {
    await this.gateway.close();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export async function startFakeDiscord(options: FakeDiscordOptions = {}): Promise<FakeDiscord> {
  const fake = new FakeDiscord(options);
  await fake.listen();
  return fake;
}
