import { Client, GatewayIntentBits, Partials } from 'discord.js';

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
