import type { ChatModel, ModelCallOptions, ModelRequest, ModelResponse } from './chat-model.js';
import { abortedModelError } from './model-error.js';

interface Waiter {
  start: () => void;
  cancel: () => void;
}

/**
 * Wraps a model so that at most `max` calls run at once across every caller (channels,
 * compaction workers, branches). Callers beyond the limit wait in arrival order; a caller
 * whose signal fires while waiting leaves the queue without ever taking a slot.
 */
export function limitConcurrency(model: ChatModel, max: number): ChatModel {
  if (!Number.isInteger(max) || max < 1) {
    throw new RangeError(`limitConcurrency: max must be a positive integer, got ${max}`);
  }
  let running = 0;
  const waiting: Waiter[] = [];

  function acquire(signal: AbortSignal | undefined): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortedModelError(signal));
    if (running < max) {
      running += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = (): void => waiter.cancel();
      const waiter: Waiter = {
        start: () => {
          signal?.removeEventListener('abort', onAbort);
          running += 1;
          resolve();
        },
        cancel: () => {
          const index = waiting.indexOf(waiter);
          if (index >= 0) waiting.splice(index, 1);
          reject(abortedModelError(signal));
        },
      };
      waiting.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  function release(): void {
    running -= 1;
    // Hand the freed slot straight to the oldest waiter, so nobody can overtake it.
    const next = waiting.shift();
    if (next) next.start();
  }

  return {
    model: model.model,
    async createMessage(request: ModelRequest, options: ModelCallOptions = {}): Promise<ModelResponse> {
      await acquire(options.signal);
      try {
        return await model.createMessage(request, options);
      } finally {
        release();
      }
    },
  };
}
