/**
 * The checkpoint thread's side (see wal-checkpointer.ts): a connection of its own to one SQLite
 * file that copies the WAL into the main file whenever the WAL changed since it last looked.
 */
import { statSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { CheckpointThreadData, CheckpointThreadReport } from './wal-checkpointer.js';

const { file, intervalMs } = workerData as CheckpointThreadData;
const port = parentPort!;
const report = (message: CheckpointThreadReport): void => port.postMessage(message);

let db: Database.Database | undefined;
let seen = '';

function walState(): string | undefined {
  try {
    const stat = statSync(`${file}-wal`);
    return `${stat.size}:${stat.mtimeMs}`;
  } catch {
    // No WAL (rollback-journal mode, or truncated to nothing and removed): nothing to copy.
    return undefined;
  }
}

function tick(): void {
  const state = walState();
  if (state === undefined || state === seen) return;
  const started = performance.now();
  try {
    db ??= new Database(file, { fileMustExist: true });
    // PASSIVE never waits and never makes the writer wait: it copies what no reader still needs
    // and leaves the rest for the next tick (or for the writer's own fallback checkpoint).
    const [result] = db.pragma('wal_checkpoint(PASSIVE)') as Array<{ busy: number; log: number; checkpointed: number }>;
    seen = walState() ?? '';
    report({ type: 'checkpoint', busy: result?.busy ?? 0, log: result?.log ?? 0, checkpointed: result?.checkpointed ?? 0, ms: performance.now() - started });
  } catch (error) {
    report({ type: 'failed', error: error instanceof Error ? error.message : String(error) });
  }
}

const timer = setInterval(tick, intervalMs);
port.on('message', (message: unknown) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  db?.close();
  db = undefined;
  port.close();
});
