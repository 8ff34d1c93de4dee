import { Client, GatewayIntentBits, Partials, Status } from 'discord.js';

/** Where discord.js talks to; tests point it at a fake Discord on loopback. */
export interface DiscordClientOptions {
  /** REST base without version, e.g. `http://127.0.0.1:PORT/api`; empty = Discord itself. */
  restApi?: string;
  /**
   * Client-side cap on REST requests per second (Discord's global limit is 50). Raised only
   * to measure Magpie itself against a fake Discord.
   */
  globalRequestsPerSecond?: number;
  /** Milliseconds to wait for guilds after READY before declaring the client ready. */
  waitGuildTimeoutMs?: number;
}

/**
 * The discord.js client the adapter runs on: guild text, message content and DMs. DM channels
 * are not cached before their first message, so the Channel partial lets them arrive at all.
 * No gateway compression is requested (discord.js only asks for it when zlib-sync is present).
 */
export function createDiscordClient(options: DiscordClientOptions = {}): Client {
  return new Client({
    intents: [
      GatewayIntentBits.Guilds,
      GatewayIntentBits.GuildMessages,
      GatewayIntentBits.MessageContent,
      GatewayIntentBits.DirectMessages,
    ],
    partials: [Partials.Channel, Partials.Message],
    ...(options.waitGuildTimeoutMs === undefined ? {} : { waitGuildTimeout: options.waitGuildTimeoutMs }),
    rest: {
      ...(options.restApi ? { api: options.restApi } : {}),
      ...(options.globalRequestsPerSecond ? { globalRequestsPerSecond: options.globalRequestsPerSecond } : {}),
    },
    // The bot never needs to mention anyone beyond the author it replies to.
    allowedMentions: { parse: ['users'], repliedUser: true },
  });
}

/**
 * Keeps a gateway event discord.js cannot decode from ending the process. discord.js turns each
 * dispatch into its objects inside `handlePacket`, and a payload of an unexpected shape (a list
 * that is null, an author that is missing) throws there, inside an async socket handler: an
 * unhandled rejection, which ends a Node process. The event is dropped and reported instead;
 * the ones after it are handled as usual. Library internals, reached defensively: without the
 * method nothing is wrapped.
 */
export function catchMalformedPackets(client: Client, report: (eventType: string, error: unknown) => void): void {
  const manager = client.ws as unknown as { handlePacket?: (packet?: { t?: unknown }, shard?: unknown) => boolean };
  const original = manager.handlePacket;
  if (typeof original !== 'function') return;
  manager.handlePacket = function (this: unknown, packet, shard) {
    try {
      return original.call(this, packet, shard);
    } catch (error) {
      report(typeof packet?.t === 'string' ? packet.t : 'unknown', error);
      return true;
    }
  };
}

/** The part of a gateway socket this module touches. */
interface ListenableSocket {
  on(event: 'error', listener: (error: unknown) => void): unknown;
}

/**
 * Destroys the client without the crash discord.js 14 (@discordjs/ws 1.2) has when a gateway
 * socket is still connecting: destroying a shard drops that socket's only error listener, so
 * the refused or dropped connection then throws an unhandled 'error' event and ends the
 * process (SIGTERM during a Discord outage or a reconnect). Such sockets get a listener first.
 */
export async function destroyClient(client: Client): Promise<void> {
  for (const socket of gatewaySockets(client)) {
    socket.on('error', () => {
      // The shard is being destroyed; its connection failing is expected.
    });
  }
  await client.destroy();
}

/** The shards' current sockets, found defensively: these are library internals. */
function gatewaySockets(client: Client): ListenableSocket[] {
  const internal = client.ws as unknown as { _ws?: { strategy?: { shards?: unknown } } } | undefined;
  const shards = internal?._ws?.strategy?.shards;
  if (!(shards instanceof Map)) return [];
  const sockets: ListenableSocket[] = [];
  for (const shard of shards.values()) {
    const connection = (shard as { connection?: unknown } | undefined)?.connection;
    if (connection && typeof (connection as { on?: unknown }).on === 'function') sockets.push(connection as ListenableSocket);
  }
  return sockets;
}

/**
 * Why the client cannot serve Discord right now (for `/readyz`), or undefined when every shard
 * is connected. A shard that is resuming or reconnecting counts as not ready.
 */
export function connectionProblem(client: Client): string | undefined {
  if (!client.isReady()) return 'discord not connected yet';
  const shards = [...client.ws.shards.values()];
  const waiting = shards.filter((shard) => shard.status !== Status.Ready);
  if (waiting.length > 0) return `discord reconnecting (${waiting.length} of ${shards.length} shard${shards.length === 1 ? '' : 's'})`;
  return undefined;
}
