import { storageError } from './storage-error.js';
import type { StorageHealth } from './storage-health.js';

export interface StorageRetryOptions {
  health: StorageHealth;
  dataDir: string;
  /** Waits before the attempts after the first, in ms (default: 0.25 s doubling to 30 s, about 2 minutes in all). */
  delaysMs?: readonly number[];
  sleep?: (ms: number) => Promise<void>;
  /**
   * Aborted at shutdown: a wait before the next attempt ends at once, and no attempt follows one
   * that fails after the abort (the last one is made now rather than after its backoff).
   */
  signal?: AbortSignal;
  /** Told about every failed attempt. */
  onRetry?: (attempt: number, delayMs: number, error: Error) => void;
  /** The first attempt already ran and failed with this (a caller that tried once on its own). */
  firstFailure?: { error: unknown };
}

export const DEFAULT_STORAGE_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000];

/**
 * Runs a write; a retryable storage failure (full disk, I/O error, busy database) marks storage
 * unhealthy and is retried with backoff, and the first success marks it healthy again. Anything
 * else, or the last failure, is thrown (as a clear storage error when it is one).
 */
export async function withStorageRetry<T>(work: () => T | Promise<T>, options: StorageRetryOptions): Promise<T> {
  const delays = options.delaysMs ?? DEFAULT_STORAGE_RETRY_DELAYS_MS;
  const sleep = options.sleep ?? ((ms: number) => pause(ms, options.signal));
  for (let attempt = 0; ; attempt += 1) {
    try {
      if (attempt === 0 && options.firstFailure) throw options.firstFailure.error;
      const result = await work();
      options.health.reportSuccess();
      return result;
    } catch (error) {
      const problem = storageError(options.dataDir, error);
      if (!problem) throw error;
      options.health.reportFailure(problem);
      const delay = delays[attempt];
      if (!problem.retryable || delay === undefined || options.signal?.aborted) throw problem;
      options.onRetry?.(attempt + 1, delay, problem);
      await sleep(delay);
    }
  }
}

/** Resolves after `ms`, or as soon as `signal` is aborted. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
