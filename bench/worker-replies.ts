import type { Worker } from 'node:worker_threads';

/**
 * The replies of a benchmark's helper thread, in order: each call of the returned function
 * waits for the next message the worker posts (or its error). Call it before posting the request
 * it answers, so a quick reply cannot slip past.
 */
export function nextReply<R>(worker: Worker): () => Promise<R> {
  const waiting: Array<(reply: R) => void> = [];
  worker.on('message', (reply: R) => waiting.shift()?.(reply));
  return () =>
    new Promise<R>((resolve, reject) => {
      waiting.push(resolve);
      worker.once('error', reject);
    });
}
