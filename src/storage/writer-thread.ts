import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { ScriptStep } from './sql-client.js';
import { stopThread } from './stop-thread.js';

/** What the writer thread is started with. */
export interface WriterThreadData {
  file: string;
}

/** What the writer thread is asked; a script is answered by a `WriterReply` with the same id. */
export type WriterRequest = { id: number; op: 'script'; steps: ScriptStep[] } | { op: 'stop' };

/** A script's outcome: committed, or refused with SQLite's message and code. */
export type WriterReply = { id: number; ok: true } | { id: number; ok: false; message: string; code?: string };

/** Cores from which `auto` turns the writer thread on. */
const CORES_FOR_WRITER_THREAD = 4;

/**
 * Whether group commits go to a writer thread (`[storage] writer_thread`). The thread frees the
 * event loop but costs CPU of its own: each connection's commits empty the other's page cache,
 * and rows are copied across. Measured on two cores, where the bot's main thread, the embedding
 * thread and the thread already share both, a burst took in about a tenth fewer messages per
 * second with it (a fifth more CPU a message, a quarter less on the event loop); so `auto` asks
 * for cores to spare.
 */
export function wantsWriterThread(setting: 'auto' | 'on' | 'off', cores: number = availableParallelism()): boolean {
  return setting === 'on' || (setting === 'auto' && cores >= CORES_FOR_WRITER_THREAD);
}

/** A statement the writer thread refused, with SQLite's code as better-sqlite3 gives it. */
class WriterThreadError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
    this.name = 'SqliteError';
  }
}

type Pending = { resolve: () => void; reject: (error: unknown) => void };

/**
 * A second connection to a data dir's SQLite file, on a thread of its own, for the transactions
 * that write the most: a burst's group commits. Their inserts, FTS5's flush and the COMMIT cost
 * the thread's core, not the event loop's; the main thread sends a whole group's rows as one
 * script and hears the outcome once, free meanwhile to decode the next messages. (One message
 * each way matters: during a burst the event loop answers a message only between turns that
 * can each take a hundred milliseconds, so a transaction sent statement by statement waited
 * that long for every step.)
 *
 * SQLite lets one connection write at a time. The main connection's client (`SerialClient`)
 * holds the file for the whole of an off-thread transaction, so no write of the main thread ever
 * meets the thread's lock (and waits on it with the event loop held); reads of the main thread
 * go on meanwhile, seeing what was committed before.
 *
 * When the thread fails (it could not open the file, or exited), `usable` turns false and every
 * script waiting on it is refused; the client then writes on its own connection again.
 */
export class WriterThread {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failure: Error | undefined;
  private stopping = false;
  private readonly exited: Promise<void>;

  constructor(
    file: string,
    private readonly options: { onFailure?: (error: string) => void } = {},
  ) {
    this.worker = new Worker(new URL('./writer-thread-worker.js', import.meta.url), { workerData: { file } satisfies WriterThreadData });
    // Kept alive by the scripts waiting on it only (see `script`), never on its own.
    this.worker.unref();
    this.worker.on('message', (reply: WriterReply) => {
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) this.worker.unref();
      if (reply.ok) waiting.resolve();
      else waiting.reject(new WriterThreadError(reply.message, reply.code));
    });
    this.worker.on('error', (error) => this.fail(new Error(`writer thread: ${error.message}`)));
    this.exited = new Promise<void>((resolve) =>
      this.worker.once('exit', (code) => {
        if (!this.stopping) this.fail(new Error(`writer thread exited with code ${code}`));
        resolve();
      }),
    );
  }

  /** False once the thread failed or was asked to stop. */
  get usable(): boolean {
    return this.failure === undefined && !this.stopping;
  }

  /** Runs `steps` in one transaction on the thread (BEGIN IMMEDIATE … COMMIT); resolves once committed. */
  script(steps: ScriptStep[]): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.stopping) return Promise.reject(new Error('writer thread closed'));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // A process whose only work left is an answer from this thread must wait for it.
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, op: 'script', steps } satisfies WriterRequest);
    });
  }

  /** Closes the thread's connection (after every script already sent) and ends the thread. */
  async close(): Promise<void> {
    if (this.stopping) return this.exited;
    this.stopping = true;
    await stopThread(this.worker, this.exited, { op: 'stop' } satisfies WriterRequest);
    this.refuseAll(new Error('writer thread closed'));
  }

  private fail(error: Error): void {
    if (this.failure === undefined) this.options.onFailure?.(error.message);
    this.failure ??= error;
    this.refuseAll(error);
  }

  private refuseAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
    this.worker.unref();
  }
}
