import type { Worker } from 'node:worker_threads';

/** How long a thread is given to close its connection before it is stopped hard. */
const STOP_GRACE_MS = 5_000;

/**
 * Asks a storage thread to stop (`message`, which it answers by closing its connection and its
 * port) and waits for it to exit, terminating it when it has not within the grace period.
 */
export async function stopThread(worker: Worker, exited: Promise<void>, message: unknown): Promise<void> {
  worker.postMessage(message);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), STOP_GRACE_MS)));
  const outcome = await Promise.race([exited, late]);
  clearTimeout(timer);
  if (outcome === 'late') await worker.terminate();
  await exited;
}
