/**
 * The gateway side of the fake: the WebSocket the bot's discord.js client connects to. HELLO,
 * heartbeats, IDENTIFY → READY + GUILD_CREATE, RESUME with replay of what the client missed, and
 * shards, with every dispatch routed to the shard Discord would send it to.
 */
import type { Server } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { guildPayload, userPayload } from './payloads.js';
import type { DiscordState } from './state.js';
import { FAKE_BOT_ID, FAKE_GUILD_ID } from './types.js';
import { withTimeout } from './waiters.js';

/** The gateway session of one shard other than 0 (shard 0 is the fake's own single session). */
interface ShardSession {
  socket: WebSocket;
  sessionId: string;
  sequence: number;
  authenticated: boolean;
}

export interface FakeGatewayOptions {
  /** The HTTP server whose `/gateway` path upgrades to the WebSocket. */
  server: Server;
  state: DiscordState;
  /** The gateway's URL, sent as `resume_gateway_url` (known once the server listens). */
  gatewayUrl: () => string;
  heartbeatIntervalMs: number;
  shards: number;
  disallowIntents: boolean;
}

export class FakeGateway {
  /** IDENTIFY and RESUME payloads received, in order. */
  readonly handshakes: Array<{ op: number; d: unknown }> = [];
  heartbeats = 0;
  /** The `shard` field of every IDENTIFY, in order (`[0, 1]` when the client sent none). */
  readonly identifiedShards: Array<[number, number]> = [];
  readonly shardCount: number;

  private readonly wss: WebSocketServer;
  private readonly state: DiscordState;
  private readonly gatewayUrl: () => string;
  private readonly heartbeatIntervalMs: number;
  private readonly disallowIntents: boolean;
  /** Shard 0's session (the only one when unsharded). */
  private socket: WebSocket | undefined;
  private authenticated = false;
  private sessionId = '';
  private sequence = 0;
  /** Every dispatch of the current session, for RESUME replay. */
  private dispatchLog: Array<{ s: number; t: string; d: unknown }> = [];
  /** Sessions of shards 1..N-1, by shard id. */
  private readonly shardSessions = new Map<number, ShardSession>();
  private readonly readyWaiters = new Set<() => void>();
  /** While set, IDENTIFY is answered only by `releaseIdentify()`. */
  private identifyHeld = false;
  private heldIdentify: WebSocket | undefined;

  constructor(options: FakeGatewayOptions) {
    this.state = options.state;
    this.gatewayUrl = options.gatewayUrl;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs;
    this.shardCount = options.shards;
    this.disallowIntents = options.disallowIntents;
    this.wss = new WebSocketServer({ server: options.server, path: '/gateway' });
    this.wss.on('connection', (socket) => this.handleConnection(socket));
  }

  get connected(): boolean {
    return this.socket !== undefined && this.authenticated;
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

  /** The shard Discord sends a guild's events to. */
  shardOfGuild(guildId: string): number {
    return Number((BigInt(guildId) >> 22n) % BigInt(this.shardCount));
  }

  /** Shard sessions (other than 0) that have identified and are connected. */
  get connectedShards(): number[] {
    return [...this.shardSessions.entries()].filter(([, session]) => session.authenticated).map(([id]) => id);
  }

  /** Sends an event to the shard its guild belongs to (shard 0 for DMs); returns its sequence number. */
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

  /** Ends every connection and stops accepting new ones (the HTTP server is closed by its owner). */
  async close(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    this.socket = undefined;
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

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
    this.sessionId = `session-${this.state.nextId()}`;
    this.sequence = 0;
    this.dispatchLog = [];
    this.authenticated = true;
    this.dispatch('READY', this.readyPayload(this.sessionId, 0, this.guildIdsOfShard(0)));
    for (const guildId of this.guildIdsOfShard(0)) this.dispatch('GUILD_CREATE', guildPayload(this.state, guildId));
    this.notifyReady();
  }

  /** READY as Discord sends it to one shard's session, its guilds still unavailable. */
  private readyPayload(sessionId: string, shard: number, guildIds: string[]): Record<string, unknown> {
    return {
      v: 10,
      user: userPayload(this.state.requireUser(FAKE_BOT_ID)),
      guilds: guildIds.map((id) => ({ id, unavailable: true })),
      session_id: sessionId,
      resume_gateway_url: this.gatewayUrl(),
      shard: [shard, this.shardCount],
      application: { id: FAKE_BOT_ID, flags: 0 },
      private_channels: [],
      relationships: [],
      user_settings: {},
      presences: [],
      guild_join_requests: [],
      geo_ordered_rtc_regions: [],
    };
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
    const all = [FAKE_GUILD_ID, ...this.state.extraGuilds.map((guild) => guild.id)];
    return this.shardCount === 1 ? all : all.filter((id) => this.shardOfGuild(id) === shard);
  }

  private identifyShard(socket: WebSocket, shard: number): void {
    this.shardSessions.get(shard)?.socket.terminate();
    const session: ShardSession = { socket, sessionId: `session-${this.state.nextId()}`, sequence: 0, authenticated: true };
    this.shardSessions.set(shard, session);
    socket.on('close', () => {
      if (this.shardSessions.get(shard)?.socket === socket) session.authenticated = false;
    });
    const guildIds = this.guildIdsOfShard(shard);
    this.dispatchToShard(shard, 'READY', this.readyPayload(session.sessionId, shard, guildIds));
    for (const guildId of guildIds) this.dispatchToShard(shard, 'GUILD_CREATE', guildPayload(this.state, guildId));
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
}
