import { WorkerClient } from '../common/worker-client.js';
import type { HashingEmbedderOptions } from './hashing-options.js';

/** What the embedding thread is asked: the embedder's options (so one thread serves any) and the texts. */
export interface EmbeddingRequest {
  options: HashingEmbedderOptions;
  texts: string[];
}

/**
 * One thread per process that computes hashing embeddings of large batches (the vector backlog,
 * backfills, rebuilds), so that the event loop ingesting messages and answering turns does not
 * spend its time on them. Its answer is every vector back to back in one transferred buffer. A
 * thread that dies fails the batches it held (their callers retry).
 */
class EmbeddingThread {
  private readonly client = new WorkerClient<EmbeddingRequest, ArrayBuffer>(new URL('./embedding-worker.js', import.meta.url), 'embedding thread');

  async embed(options: HashingEmbedderOptions, texts: string[]): Promise<Float32Array[]> {
    const vectors = await this.client.request({ options, texts });
    return texts.map((_, index) => new Float32Array(vectors, index * options.dimension * 4, options.dimension));
  }
}

let shared: EmbeddingThread | undefined;

/** The process's embedding thread. */
export function embeddingThread(): { embed(options: HashingEmbedderOptions, texts: string[]): Promise<Float32Array[]> } {
  shared ??= new EmbeddingThread();
  return shared;
}
