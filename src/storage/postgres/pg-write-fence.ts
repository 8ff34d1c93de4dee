import { MagpieError } from '../../common/errors.js';
import { WRITES_HELD } from '../sql-client.js';

/**
 * Holds writes back while this process cannot confirm that it holds its writer lock (the lock
 * session is reconnecting): `raise` when the session goes away, `lower` when it is back with its
 * locks. Once `refuse` is called (the store is closing, its locks about to be released), a write
 * that finds the fence up fails at once instead of waiting for a lock nobody will take back.
 */
export class WriteFence {
  private held: { promise: Promise<void>; release(): void; fail(error: Error): void } | undefined;
  private refusal: MagpieError | undefined;

  constructor(private readonly schema: string) {}

  /** What a write waits for now; undefined when it may go ahead. */
  current(): Promise<void> | undefined {
    return this.held?.promise;
  }

  raise(): void {
    if (this.held) return;
    let release!: () => void;
    let fail!: (error: Error) => void;
    const promise = new Promise<void>((resolve, reject) => ((release = resolve), (fail = reject)));
    // A fence nobody waited on may fail unheard.
    promise.catch(() => undefined);
    this.held = { promise, release, fail };
    if (this.refusal) this.held.fail(this.refusal);
  }

  lower(): void {
    this.held?.release();
    this.held = undefined;
  }

  /** From now on a raised fence fails its writes at once (and a raised one fails those waiting). */
  refuse(reason: string): void {
    this.refusal ??= new MagpieError(WRITES_HELD, `this write was not made: ${reason}`, { context: { schema: this.schema } });
    this.held?.fail(this.refusal);
  }
}

/**
 * Waits while `fence` returns a promise (it may be raised again as soon as it fell), for at most
 * `deadlineMs` in all: past it, a retryable `storage_writes_held`, so a write never waits longer
 * than a statement may take. A fence that fails (the store is closing) fails the write with it.
 */
export async function passWriteFence(fence: () => Promise<void> | undefined, deadlineMs: number, schema: string): Promise<void> {
  const started = Date.now();
  for (let waiting = fence(); waiting; waiting = fence()) {
    const left = deadlineMs - (Date.now() - started);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), Math.max(0, left))));
    const outcome = await Promise.race([waiting.then(() => 'passed' as const), expired]).finally(() => clearTimeout(timer));
    if (outcome === 'expired') {
      throw new MagpieError(WRITES_HELD, 'writes wait until the writer lock is confirmed, and the lock session has not reconnected yet', {
        retryable: true,
        context: { schema, waitedMs: Date.now() - started },
      });
    }
  }
}
