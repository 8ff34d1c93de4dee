import type { EventStream } from '../common/events.js';
import { errorMessage, type MagpieError } from '../common/errors.js';

/**
 * Whether the data dir currently takes writes: false from the first failed write until one
 * succeeds again. The readiness probe reads `healthy` (or listens with `onChange`); the
 * transitions are also events, `storage_unhealthy` (a warning) and `storage_recovered`.
 */
export class StorageHealth {
  private failing: MagpieError | undefined;
  private readonly listeners = new Set<(healthy: boolean) => void>();

  constructor(private readonly options: { dataDir: string; events: EventStream }) {}

  get healthy(): boolean {
    return this.failing === undefined;
  }

  /** The error that made storage unhealthy, while it is. */
  get problem(): MagpieError | undefined {
    return this.failing;
  }

  /** Returns a function that removes the listener. */
  onChange(listener: (healthy: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  reportFailure(error: MagpieError): void {
    const wasHealthy = this.failing === undefined;
    this.failing = error;
    if (!wasHealthy) return;
    this.options.events.emit({
      type: 'storage_unhealthy',
      data_dir: this.options.dataDir,
      code: error.code,
      error: errorMessage(error),
    });
    this.notify(false);
  }

  reportSuccess(): void {
    if (this.failing === undefined) return;
    this.failing = undefined;
    this.options.events.emit({ type: 'storage_recovered', data_dir: this.options.dataDir });
    this.notify(true);
  }

  private notify(healthy: boolean): void {
    for (const listener of this.listeners) {
      try {
        listener(healthy);
      } catch {
        // A broken listener must not break storage handling.
      }
    }
  }
}
