import { Worker } from 'node:worker_threads';
import type { HashingEmbedderOptions } from './hashing-options.js';

/** What the embedding thread is asked: the embedder's options (so one thread serves any) and the texts. */
export interface EmbeddingRequest {
  id: number;
  options: HashingEmbedderOptions;
  texts: string[];
}

/** Its answer: every vector back to back in one transferred buffer, or why not. */
export type EmbeddingReply = { id: number; vectors: ArrayBuffer } | { id: number; error: string };

interface Pending {
  resolve: (vectors: Float32Array[]) => void;
  reject: (error: Error) => void;
  count: number;
  dimension: number;
}

/**
 * One thread per process that computes hashing embeddings of large batches (the vector backlog,
 * backfills, rebuilds), so that the event loop ingesting messages and answering turns does not
 * spend its time on them. Started on first use; it keeps the process alive only while a batch is
 * in flight. A thread that dies fails the batches it held (their callers retry) and the next batch
 * starts a new one.
 */
class EmbeddingThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  embed(options: HashingEmbedderOptions, texts: string[]): Promise<Float32Array[]> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, count: texts.length, dimension: options.dimension });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage({ id, options, texts } satisfies EmbeddingRequest);
    });
  }

  private start(): Worker {
    const worker = new Worker(new URL('./embedding-worker.js', import.meta.url));
    worker.unref();
    worker.on('message', (reply: EmbeddingReply) => {
      const pending = this.pending.get(reply.id);
      if (!pending) return;
      this.settle(reply.id);
      if ('error' in reply) {
        pending.reject(new Error(`embedding thread: ${reply.error}`));
        return;
      }
      const vectors: Float32Array[] = [];
      for (let index = 0; index < pending.count; index += 1) {
        vectors.push(new Float32Array(reply.vectors, index * pending.dimension * 4, pending.dimension));
      }
      pending.resolve(vectors);
    });
    const fail = (error: Error): void => {
      if (this.worker === worker) this.worker = undefined;
      for (const [id, pending] of [...this.pending]) {
        this.settle(id);
        pending.reject(error);
      }
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`embedding thread exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private settle(id: number): void {
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
  }
}

let shared: EmbeddingThread | undefined;

/** The process's embedding thread. */
export function embeddingThread(): { embed(options: HashingEmbedderOptions, texts: string[]): Promise<Float32Array[]> } {
  shared ??= new EmbeddingThread();
  return shared;
}
