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

  /** The file the config was read from; undefined when it is the built-in defaults. */
  readonly file: string | undefined;

  constructor(config: MagpieConfig, options: { file?: string } = {}) {
    this.config = config;
    this.file = options.file;
  }

  current(): MagpieConfig {
    return this.config;
  }

  /** Per-channel overrides already merged over `[defaults]`; threads may pass their parent too. */
  settingsFor(channelId: string, parentId?: string): ChannelSettings {
    // Own keys only: a channel named `constructor` must not find Object.prototype's.
    const channels = this.config.channels;
    if (Object.hasOwn(channels, channelId)) return channels[channelId]!;
    if (parentId !== undefined && Object.hasOwn(channels, parentId)) return channels[parentId]!;
    return this.config.defaults;
  }

  replace(next: MagpieConfig): void {
    const previous = this.config;
    this.config = next;
    // Every listener hears about the new config even if one throws; the failures are then
    // reported to the caller (the watcher logs them).
    const failures: unknown[] = [];
    for (const listener of this.listeners) {
      try {
        listener(next, previous);
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) throw new AggregateError(failures, `${failures.length} config listeners failed`);
  }

  subscribe(listener: ConfigListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
