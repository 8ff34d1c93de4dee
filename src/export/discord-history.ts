import { DiscordAPIError, REST, RESTEvents, Routes, type RateLimitData } from 'discord.js';
import { MagpieError } from '../common/errors.js';

/** The fields of a Discord message (API v10) that an export reads. */
export interface ApiMessage {
  id: string;
  channel_id: string;
  type: number;
  content: string;
  timestamp: string;
  author: { id: string; username: string; global_name?: string | null; bot?: boolean };
  mentions?: Array<{ id: string; username: string; global_name?: string | null }>;
  attachments?: Array<{ filename: string }>;
  embeds?: Array<{ title?: string; url?: string; description?: string }>;
  sticker_items?: Array<{ name: string }>;
}

export interface HistoryReaderOptions {
  token: string;
  /** REST base without version (`MAGPIE_DISCORD_API`); default: Discord's own. */
  api?: string;
  /** Called each time Discord asks us to wait (the REST client waits and retries by itself). */
  onRateLimit?: (info: { retryAfterMs: number; route: string }) => void;
}

/** Discord returns at most this many messages a request. */
export const PAGE_SIZE = 100;

/**
 * Reads channels through Discord's REST API with the bot's token. The discord.js REST client
 * queues requests per route bucket and waits out 429s (`retry_after`) before retrying.
 */
export class DiscordHistoryReader {
  private readonly rest: REST;

  constructor(options: HistoryReaderOptions) {
    this.rest = new REST({ version: '10', ...(options.api ? { api: options.api } : {}) }).setToken(options.token);
    if (options.onRateLimit) {
      const onRateLimit = options.onRateLimit;
      this.rest.on(RESTEvents.RateLimited, (info: RateLimitData) => onRateLimit({ retryAfterMs: info.retryAfter, route: info.route }));
    }
  }

  /** The bot's own user id (its messages are the `assistant` side of a transcript). */
  async selfId(): Promise<string> {
    const user = (await this.call('read the bot user', () => this.rest.get(Routes.user()))) as { id: string };
    return user.id;
  }

  /**
   * Pages through a channel oldest first, starting after `afterId` (default: its beginning),
   * yielding each page in ascending id order until the channel is exhausted.
   */
  async *pagesAfter(channelId: string, afterId = '0'): AsyncGenerator<ApiMessage[]> {
    let after = afterId;
    for (;;) {
      const query = new URLSearchParams({ after, limit: String(PAGE_SIZE) });
      const page = (await this.call(`read channel ${channelId}`, () =>
        this.rest.get(Routes.channelMessages(channelId), { query }),
      )) as ApiMessage[];
      if (!Array.isArray(page) || page.length === 0) return;
      // Discord answers newest first whatever the direction; an export reads oldest first.
      const sorted = [...page].sort((left, right) => compareSnowflakes(left.id, right.id));
      yield sorted;
      const last = sorted[sorted.length - 1]!.id;
      if (page.length < PAGE_SIZE || compareSnowflakes(last, after) <= 0) return;
      after = last;
    }
  }

  /** Turns Discord's refusals into errors that say what to fix. */
  private async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      throw explainDiscordError(error, what);
    }
  }
}

function explainDiscordError(error: unknown, what: string): MagpieError {
  if (error instanceof DiscordAPIError) {
    const context = { status: error.status, discord_code: error.code };
    if (error.status === 401) {
      return new MagpieError('discord_unauthorized', `cannot ${what}: Discord refused the bot token (401)`, {
        cause: error,
        context,
        hint: 'check the token in the variable named by [discord] token_env (Bot → Reset Token in the developer portal)',
      });
    }
    if (error.status === 403) {
      return new MagpieError('discord_forbidden', `cannot ${what}: the bot may not read it (403 ${error.message})`, {
        cause: error,
        context,
        hint: 'give the bot the View Channel and Read Message History permissions in that channel',
      });
    }
    if (error.status === 404) {
      return new MagpieError('discord_not_found', `cannot ${what}: Discord does not know it (404 ${error.message})`, {
        cause: error,
        context,
        hint: 'check the channel id (Developer Mode → right-click the channel → Copy Channel ID) and that the bot is in that server',
      });
    }
    return new MagpieError('discord_failed', `cannot ${what}: Discord answered ${error.status} ${error.message}`, { cause: error, context, retryable: error.status >= 500 });
  }
  const message = error instanceof Error ? error.message : String(error);
  return new MagpieError('discord_unreachable', `cannot ${what}: ${message}`, {
    cause: error,
    retryable: true,
    hint: 'check the network (or MAGPIE_DISCORD_API, if set)',
  });
}

/** Orders two snowflakes (decimal strings longer than a double holds exactly). */
export function compareSnowflakes(left: string, right: string): number {
  if (left.length !== right.length) return left.length - right.length;
  return left < right ? -1 : left > right ? 1 : 0;
}
