import { MagpieError } from '../../common/errors.js';
import { PG_CONNECTION_LOST } from './pg-error.js';

/**
 * Waits while `fence` returns a promise (it may be raised again as soon as it fell), for at most
 * `deadlineMs` in all: past it, a retryable `storage_connection`, so a write never waits longer
 * than a statement may take.
 */
export async function passWriteFence(fence: () => Promise<void> | undefined, deadlineMs: number, schema: string): Promise<void> {
  const started = Date.now();
  for (let waiting = fence(); waiting; waiting = fence()) {
    const left = deadlineMs - (Date.now() - started);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), Math.max(0, left))));
    const outcome = await Promise.race([waiting.then(() => 'passed' as const), expired]).finally(() => clearTimeout(timer));
    if (outcome === 'expired') {
      throw new MagpieError(PG_CONNECTION_LOST, 'writes wait until the writer lock is confirmed, and the lock session has not reconnected yet', {
        retryable: true,
        context: { schema, waitedMs: Date.now() - started },
      });
    }
  }
}
