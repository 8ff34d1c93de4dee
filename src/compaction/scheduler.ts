/**
 * A started worker, as the scheduler sees it: when its work is done, and how to land it.
 */
export interface WorkerHandle {
  channelId: string;
  compactionId: string;
  /** Settles (never rejects) when the worker has a result, a failure or a timeout. */
  settled: Promise<void>;
  /** Applies the outcome to the channel (splice, failure or re-plan). Called once, after `settled`. */
  land(): void | Promise<void>;
}

/**
 * Decides *when* a finished worker's result lands. The bot lands it as soon as it is ready;
 * `magpie replay --worker-lag N` holds it until N more messages have arrived in its channel, so
 * that the interplay of tiers is reproducible without sleeping.
 */
export interface CompactionScheduler {
  submit(handle: WorkerHandle): void;
  /** Called before each message is appended to a channel; may land held results first. */
  beforeMessage(channelId: string): Promise<void> | undefined;
  /** Called after each message has been appended to a channel. */
  afterMessage(channelId: string): void;
  /** Lands every result still outstanding (end of a replay, shutdown). */
  drain(): Promise<void>;
}

/** Lands each result the moment its worker finishes (the bot). */
export class ImmediateScheduler implements CompactionScheduler {
  private readonly outstanding = new Set<Promise<void>>();

  submit(handle: WorkerHandle): void {
    // `land` reports its own failures; the catch is the last guard that keeps an error from
    // becoming an unhandled rejection, which would end the process.
    const landing = handle.settled.then(() => handle.land()).catch(() => undefined);
    this.outstanding.add(landing);
    void landing.then(() => this.outstanding.delete(landing));
  }

  beforeMessage(): undefined {
    return undefined;
  }

  afterMessage(): void {}

  async drain(): Promise<void> {
    while (this.outstanding.size > 0) await Promise.all([...this.outstanding]);
  }
}

interface HeldWorker {
  handle: WorkerHandle;
  arrived: number;
}

/**
 * Lands a worker's result only once `lag` more messages have arrived in its channel, before the
 * next one is appended (lag 0: before the very next message). It waits for the worker at that
 * point, so the outcome depends on message order alone, never on timing.
 */
export class LaggedScheduler implements CompactionScheduler {
  private readonly held = new Map<string, HeldWorker[]>();

  constructor(private readonly lag: number) {}

  submit(handle: WorkerHandle): void {
    const list = this.held.get(handle.channelId) ?? [];
    list.push({ handle, arrived: 0 });
    this.held.set(handle.channelId, list);
  }

  beforeMessage(channelId: string): Promise<void> | undefined {
    const list = this.held.get(channelId);
    if (!list || list[0]!.arrived < this.lag) return undefined;
    return this.landDue(channelId, list);
  }

  afterMessage(channelId: string): void {
    const list = this.held.get(channelId);
    if (!list) return;
    for (const held of list) held.arrived += 1;
  }

  async drain(): Promise<void> {
    while (this.held.size > 0) {
      const [channelId, list] = this.held.entries().next().value as [string, HeldWorker[]];
      await this.landDue(channelId, list, { all: true });
    }
  }

  private async landDue(channelId: string, list: HeldWorker[], options: { all?: boolean } = {}): Promise<void> {
    while (list.length > 0 && (options.all || list[0]!.arrived >= this.lag)) {
      const held = list.shift()!;
      await held.handle.settled;
      try {
        await held.handle.land();
      } catch {
        // `land` reports its own failures; one landing never stops the ones behind it.
      }
    }
    if (list.length === 0 && this.held.get(channelId) === list) this.held.delete(channelId);
  }
}
