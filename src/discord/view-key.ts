import { createHash } from 'node:crypto';
import { ChannelType, PermissionFlagsBits, type Channel, type Client } from 'discord.js';
import { privateThreadKey, type ChannelView } from '../privacy/channel-views.js';

const VIEW = PermissionFlagsBits.ViewChannel;

/**
 * Who can view a guild channel, as a key: two channels with the same permission overwrites
 * touching View Channel (for @everyone, roles and members) get the same key. Guild-wide role
 * permissions are the same for every channel, so the overwrites alone decide the difference.
 * A public thread is viewed by whoever views its parent; a private thread only by its members,
 * so it gets a key of its own. Undefined for DMs and channels outside a guild.
 */
export function viewOf(channel: Channel): ChannelView | undefined {
  if (channel.isDMBased() || !('guildId' in channel) || !channel.guildId) return undefined;
  if (channel.isThread()) {
    if (channel.type === ChannelType.PrivateThread) {
      return { channelId: channel.id, guildId: channel.guildId, ...(channel.parentId ? { parentId: channel.parentId } : {}), viewKey: privateThreadKey(channel.id) };
    }
    const parent = channel.parent;
    if (!parent) return undefined;
    const parentView = viewOf(parent);
    if (!parentView) return undefined;
    return { channelId: channel.id, guildId: channel.guildId, parentId: parent.id, viewKey: parentView.viewKey };
  }
  if (!('permissionOverwrites' in channel)) return undefined;
  const terms = [...channel.permissionOverwrites.cache.values()]
    .filter((overwrite) => overwrite.allow.has(VIEW) || overwrite.deny.has(VIEW))
    .map((overwrite) => `${overwrite.type}:${overwrite.id}:${overwrite.allow.has(VIEW) ? 'allow' : 'deny'}`)
    .sort();
  const key = terms.length === 0 ? 'open' : createHash('sha256').update(terms.join('|')).digest('hex').slice(0, 24);
  return { channelId: channel.id, guildId: channel.guildId, viewKey: `view:${key}` };
}

/** Every guild channel the client knows, parents before their threads. */
export function knownViews(client: Client): ChannelView[] {
  const channels = [...client.channels.cache.values()];
  const ordered = [...channels.filter((channel) => !channel.isThread()), ...channels.filter((channel) => channel.isThread())];
  return ordered.flatMap((channel) => viewOf(channel) ?? []);
}
