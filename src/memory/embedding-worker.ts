/** The embedding thread's side (see embedding-thread.ts): hashing embeddings, nothing else. */
import { parentPort } from 'node:worker_threads';
import type { WorkerReply } from '../common/worker-client.js';
import type { EmbeddingRequest } from './embedding-thread.js';
import { HashingEmbedder } from './hashing-embedder.js';

const embedders = new Map<string, HashingEmbedder>();

parentPort!.on('message', (request: EmbeddingRequest & { id: number }) => {
  try {
    const key = JSON.stringify(request.options);
    let embedder = embedders.get(key);
    if (!embedder) {
      // Never threaded itself: this is the thread.
      embedder = new HashingEmbedder({ ...request.options, offThread: false });
      embedders.set(key, embedder);
    }
    const out = new Float32Array(request.texts.length * embedder.dimension);
    request.texts.forEach((text, index) => out.set(embedder!.embedOne(text), index * embedder!.dimension));
    parentPort!.postMessage({ id: request.id, result: out.buffer } satisfies WorkerReply<ArrayBuffer>, [out.buffer]);
  } catch (error) {
    parentPort!.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) } satisfies WorkerReply<ArrayBuffer>);
  }
});
