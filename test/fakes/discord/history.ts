/**
 * A channel's past: messages a test seeds as if written before the bot came, and the paging
 * of GET /channels/:id/messages over them as Discord does it (the bot's catch-up after an
 * outage, `magpie export`).
 */
import { plainMessageFields, userPayload } from './payloads.js';
import { guildOf, type DiscordState } from './state.js';

/**
 * GET /channels/:id/messages as Discord answers it: `limit` (1-100, default 50) messages,
 * newest first; with `after`, the oldest ones after that id; with `before`, the newest before it;
 * with `around`, about half before the id and the rest from it on (the id itself if it exists).
 */
export function channelHistory(
  messages: Map<string, Record<string, unknown>>,
  channelId: string,
  query: URLSearchParams,
): Array<Record<string, unknown>> {
  const limit = Math.min(100, Math.max(1, Number(query.get('limit') ?? 50) || 50));
  const after = query.get('after');
  const before = query.get('before');
  const around = query.get('around');
  const inChannel = [...messages.values()]
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

/**
 * Past messages of a channel, as if written before the bot was there: stored for
 * GET /channels/:id/messages, not dispatched. `at` (ms) sets the time inside each snowflake,
 * so ids sort like the messages; default: one minute apart ending a day ago. Returns the ids.
 */
export function seedHistory(state: DiscordState, channelId: string, messages: Array<{ authorId: string; content: string; at?: number }>): string[] {
  const channel = state.requireChannel(channelId);
  const guildId = guildOf(channel);
  const start = Date.now() - 86_400_000 - messages.length * 60_000;
  return messages.map((message, index) => {
    const at = message.at ?? start + index * 60_000;
    const id = state.idAt(at);
    const author = state.requireUser(message.authorId);
    state.messages.set(id, {
      id,
      channel_id: channel.id,
      author: userPayload(author),
      content: message.content,
      timestamp: new Date(at).toISOString(),
      ...plainMessageFields(),
      ...(guildId ? { guild_id: guildId } : {}),
    });
    return id;
  });
}
