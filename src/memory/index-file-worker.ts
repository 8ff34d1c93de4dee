/** The index-file thread's side (see index-file-thread.ts): checks and digests of index files. */
import { parentPort } from 'node:worker_threads';
import type { WorkerReply } from '../common/worker-client.js';
import { checkIndexFile, describeFile, type FileDigest, type IndexFileCheck } from './index-file.js';
import type { IndexFileRequest } from './index-file-thread.js';

parentPort!.on('message', (request: IndexFileRequest & { id: number }) => {
  type Reply = WorkerReply<IndexFileCheck | FileDigest>;
  try {
    const result = request.task === 'check' ? checkIndexFile(request.file, request.expected) : describeFile(request.file);
    parentPort!.postMessage({ id: request.id, result } satisfies Reply);
  } catch (error) {
    parentPort!.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) } satisfies Reply);
  }
});
