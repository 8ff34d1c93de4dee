import type { ChannelSettings, MagpieConfig } from './types.js';

export type ConfigListener = (next: MagpieConfig, previous: MagpieConfig) => void;

/**
 * The configuration in force right now. Hot reload swaps in a new validated config with
 * `replace`; readers ask `settingsFor(channelId)` each time they need a value, so a change
 * applies from the next Compactor check without a restart.
 */
export class LiveConfig {
  private config: MagpieConfig;
  private readonly listeners = new Set<ConfigListener>();

  constructor(config: MagpieConfig) {
    this.config = config;
  }

  current(): MagpieConfig {
    return this.config;
  }

  /** Per-channel overrides already merged over `[defaults]`; threads may pass their parent too. */
  settingsFor(channelId: string, parentId?: string): ChannelSettings {
    return (
      this.config.channels[channelId] ??
      (parentId === undefined ? undefined : this.config.channels[parentId]) ??
      this.config.defaults
    );
  }

  replace(next: MagpieConfig): void {
    const previous = this.config;
    this.config = next;
    for (const listener of this.listeners) listener(next, previous);
  }

  subscribe(listener: ConfigListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
