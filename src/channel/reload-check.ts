import type { ChannelSettings, MagpieConfig } from '../config/types.js';

/** A channel's settings in a given config, as `LiveConfig.settingsFor` would give them. */
export function channelSettingsIn(config: MagpieConfig, channelId: string, parentId?: string): ChannelSettings {
  const channels = config.channels;
  if (Object.hasOwn(channels, channelId)) return channels[channelId]!;
  if (parentId !== undefined && Object.hasOwn(channels, parentId)) return channels[parentId]!;
  return config.defaults;
}

/** Whether a reload changed what the Compactor's usage or thresholds are computed from. */
export function windowChanged(before: ChannelSettings, after: ChannelSettings): boolean {
  if (before === after) return false;
  const a = before.compaction;
  const b = after.compaction;
  return (
    before.contextWindow !== after.contextWindow ||
    before.maxResponseTokens !== after.maxResponseTokens ||
    before.systemPrompt !== after.systemPrompt ||
    a.backgroundThreshold !== b.backgroundThreshold ||
    a.aggressiveThreshold !== b.aggressiveThreshold ||
    a.emergencyThreshold !== b.emergencyThreshold
  );
}
