/**
 * The REST side of the fake: the HTTP routes discord.js calls (gateway discovery, posting, editing
 * and deleting messages, typing, commands, interaction answers, channels and their history) and
 * the CDN route for attachments. Every request is recorded; failures can be injected.
 */
import type { IncomingMessage as HttpRequest, ServerResponse } from 'node:http';
import type { FakeGateway } from './gateway.js';
import { channelHistory } from './history.js';
import { channelPayload, messagePayload, userPayload } from './payloads.js';
import type { BotRecords } from './records.js';
import type { DiscordState } from './state.js';
import { FAKE_BOT_ID, type PostedMessage } from './types.js';

export interface FakeRestOptions {
  state: DiscordState;
  records: BotRecords;
  /** Where the bot's own posts are echoed as MESSAGE_CREATE. */
  gateway: FakeGateway;
  /** The gateway's URL, as `GET /gateway/bot` answers it. */
  gatewayUrl: () => string;
  echoBotMessages: boolean;
  rejectToken: boolean;
}

export class FakeRest {
  /** How many 429s the history route has sent. */
  historyRateLimited = 0;

  private readonly state: DiscordState;
  private readonly records: BotRecords;
  private readonly gateway: FakeGateway;
  private readonly gatewayUrl: () => string;
  private readonly echoBotMessages: boolean;
  private readonly rejectToken: boolean;
  /** Answer POST /channels/:id/messages with this status instead (once per entry). */
  private readonly failNextPosts: number[] = [];
  /** The next N history reads answer 429 with this `retry_after` (seconds). */
  private readonly historyRateLimits: number[] = [];

  constructor(options: FakeRestOptions) {
    this.state = options.state;
    this.records = options.records;
    this.gateway = options.gateway;
    this.gatewayUrl = options.gatewayUrl;
    this.echoBotMessages = options.echoBotMessages;
    this.rejectToken = options.rejectToken;
  }

  /** The next `count` reads of a channel's history answer 429, asking to retry after `retryAfterSeconds`. */
  rateLimitHistory(count: number, retryAfterSeconds: number): void {
    for (let index = 0; index < count; index += 1) this.historyRateLimits.push(retryAfterSeconds);
  }

  /** The next N POSTs of messages fail with this HTTP status. */
  failPosts(status: number, count = 1): void {
    for (let index = 0; index < count; index += 1) this.failNextPosts.push(status);
  }

  /** Answers one HTTP request (the server's only handler). */
  async handle(request: HttpRequest, response: ServerResponse): Promise<void> {
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
    this.records.requests.push({ method, path, body, at: Date.now() });
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
        url: this.gatewayUrl(),
        shards: this.gateway.shardCount,
        session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 },
      });
    }
    if (method === 'GET' && path === '/users/@me') {
      return reply(200, userPayload(this.state.requireUser(FAKE_BOT_ID)));
    }
    if (method === 'GET' && url.pathname.startsWith('/cdn/')) {
      const file = this.state.files.get(url.pathname);
      if (!file) return reply(404, { message: 'no such file' });
      const name = decodeURIComponent(url.pathname.split('/').at(-1) ?? '');
      this.records.downloads.set(name, (this.records.downloads.get(name) ?? 0) + 1);
      response.writeHead(200, { 'content-type': file.contentType, 'content-length': file.data.length }).end(file.data);
      return;
    }
    if ((method === 'PATCH' || method === 'DELETE') && (match = path.match(/^\/channels\/(\d+)\/messages\/(\d+)$/))) {
      const existing = this.state.messages.get(match[2]!);
      if (!existing) return reply(404, { message: 'Unknown Message', code: 10008 });
      const payload = (body ?? {}) as { content?: string };
      if (method === 'DELETE') {
        this.records.edits.push({ channelId: match[1]!, messageId: match[2]!, kind: 'delete', at: Date.now() });
        this.state.messages.delete(match[2]!);
        return reply(204);
      }
      const updated = { ...existing, content: payload.content ?? existing.content, edited_timestamp: new Date().toISOString() };
      this.state.messages.set(match[2]!, updated);
      this.records.edits.push({ channelId: match[1]!, messageId: match[2]!, content: payload.content, kind: 'edit', at: Date.now() });
      return reply(200, updated);
    }
    if (method === 'POST' && (match = path.match(/^\/channels\/(\d+)\/typing$/))) {
      this.records.typing.push(match[1]!);
      this.records.typingAt.push(Date.now());
      return reply(204);
    }
    if (method === 'POST' && (match = path.match(/^\/channels\/(\d+)\/messages$/))) {
      const failure = this.failNextPosts.shift();
      if (failure !== undefined) return reply(failure, { message: 'Injected failure', code: 0 });
      return reply(200, this.recordPost(match[1]!, body as Record<string, any>));
    }
    if (method === 'PUT' && (match = path.match(/^\/applications\/(\d+)(?:\/guilds\/(\d+))?\/commands$/))) {
      const commands = Array.isArray(body) ? body : [];
      this.records.registeredCommands.push({ scope: match[2] ?? 'global', commands });
      return reply(
        200,
        commands.map((command: Record<string, unknown>) => ({
          ...command,
          id: this.state.nextId(),
          application_id: match![1],
          version: this.state.nextId(),
          default_member_permissions: command.default_member_permissions ?? null,
          type: command.type ?? 1,
        })),
      );
    }
    if (method === 'POST' && (match = path.match(/^\/interactions\/(\d+)\/([^/]+)\/callback$/))) {
      const payload = (body ?? {}) as { type?: number; data?: { content?: string; flags?: number } };
      this.records.addInteractionReply({
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
    // discord.js writes `@original` percent-encoded.
    if ((match = path.match(/^\/webhooks\/(\d+)\/([^/]+)(\/messages\/(?:@|%40)original)?$/))) {
      const payload = (body ?? {}) as { content?: string; flags?: number };
      const kind = match[3] ? 'edit' : 'followup';
      if (method === 'DELETE') return reply(204);
      this.records.addInteractionReply({ token: match[2]!, kind, content: payload.content, flags: payload.flags });
      return reply(200, messagePayload(this.state, { id: this.state.nextId(), channelId: '0', content: payload.content ?? '' }));
    }
    if (method === 'GET' && (match = path.match(/^\/channels\/(\d+)$/))) {
      const channel = this.state.channels.get(match[1]!);
      if (!channel) return reply(404, { message: 'Unknown Channel', code: 10003 });
      return reply(200, channelPayload(channel));
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
      if (!this.state.channels.has(match[1]!)) return reply(404, { message: 'Unknown Channel', code: 10003 });
      return reply(200, this.channelHistory(match[1]!, url.searchParams));
    }
    if (method === 'GET' && (match = path.match(/^\/channels\/(\d+)\/messages\/(\d+)$/))) {
      const message = this.state.messages.get(match[2]!);
      if (!message) return reply(404, { message: 'Unknown Message', code: 10008 });
      return reply(200, message);
    }
    return reply(404, { message: `fake discord: no route for ${method} ${path}`, code: 0 });
  }

  private channelHistory(channelId: string, query: URLSearchParams): Array<Record<string, unknown>> {
    this.records.historyRequests.push({
      channelId,
      after: query.get('after') ?? undefined,
      before: query.get('before') ?? undefined,
      around: query.get('around') ?? undefined,
    });
    return channelHistory(this.state.messages, channelId, query);
  }

  private recordPost(channelId: string, body: Record<string, any>): Record<string, unknown> {
    const id = this.state.nextId();
    const posted: PostedMessage = {
      id,
      channelId,
      content: typeof body?.content === 'string' ? body.content : '',
      messageReference: body?.message_reference,
      allowedMentions: body?.allowed_mentions,
      flags: body?.flags,
      at: Date.now(),
    };
    const payload = messagePayload(this.state, {
      id,
      channelId,
      content: posted.content,
      referenceId: posted.messageReference?.message_id,
    });
    this.state.messages.set(id, payload);
    this.records.addPost(posted);
    if (this.echoBotMessages && this.state.channels.has(channelId)) this.gateway.dispatch('MESSAGE_CREATE', payload);
    return payload;
  }
}
