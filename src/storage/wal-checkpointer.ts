import { Worker } from 'node:worker_threads';
import { stopThread } from './stop-thread.js';

/** What the checkpoint thread is started with. */
export interface CheckpointThreadData {
  file: string;
  intervalMs: number;
}

/** What it reports after each tick that found the WAL changed. */
export type CheckpointThreadReport =
  | { type: 'checkpoint'; busy: number; log: number; checkpointed: number; ms: number }
  | { type: 'failed'; error: string };

/** Totals since the thread started, for status and tests. */
interface CheckpointStats {
  checkpoints: number;
  /** WAL frames copied into the main file (a frame is one page). */
  framesCopied: number;
  failures: number;
  /** The newest failure, if any. */
  lastError?: string;
}

export interface WalCheckpointer {
  stats(): CheckpointStats;
  /** Stops the thread and closes its connection (before the writer switches the journal mode). */
  close(): Promise<void>;
}

/** How often the thread looks at the WAL. */
const CHECKPOINT_INTERVAL_MS = 250;

/**
 * Moves WAL checkpoints off the event loop. In WAL mode a commit only appends pages to the WAL;
 * a checkpoint copies them into the main file and fsyncs both, and SQLite runs it inside
 * whichever COMMIT crosses `wal_autocheckpoint`: tens to hundreds of milliseconds on the event
 * loop every ~40 MB written, and about a twentieth of the main thread's time during an ingest
 * burst. A thread with its own connection checkpoints a few times a second instead (PASSIVE:
 * it never blocks the writer), so the writer's own checkpoint, kept as the fallback, finds
 * next to nothing left to copy. When the thread fails, the fallback carries on alone.
 */
export function startWalCheckpointer(
  file: string,
  options: { intervalMs?: number; onFailure?: (error: string) => void } = {},
): WalCheckpointer {
  const stats: CheckpointStats = { checkpoints: 0, framesCopied: 0, failures: 0 };
  let lastReported: string | undefined;
  const fail = (error: string): void => {
    stats.failures += 1;
    stats.lastError = error;
    // Said once per distinct failure, not four times a second.
    if (error !== lastReported) options.onFailure?.(error);
    lastReported = error;
  };
  const worker = new Worker(new URL('./wal-checkpoint-thread.js', import.meta.url), {
    workerData: { file, intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS } satisfies CheckpointThreadData,
  });
  // Never what keeps the process alive.
  worker.unref();
  let stopping = false;
  worker.on('message', (report: CheckpointThreadReport) => {
    if (report.type === 'failed') {
      fail(report.error);
      return;
    }
    lastReported = undefined;
    stats.checkpoints += 1;
    stats.framesCopied += report.checkpointed;
  });
  worker.on('error', (error) => fail(`checkpoint thread: ${error.message}`));
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', (code) => {
      if (!stopping) fail(`checkpoint thread exited with code ${code}`);
      resolve();
    }),
  );
  return {
    stats: () => ({ ...stats }),
    async close() {
      if (stopping) return exited;
      stopping = true;
      await stopThread(worker, exited, 'stop');
    },
  };
}
