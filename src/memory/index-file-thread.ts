import { WorkerClient } from '../common/worker-client.js';
import type { FileDigest, IndexExpectation, IndexFileCheck } from './index-file.js';

/** What the index-file thread is asked. */
export type IndexFileRequest = { task: 'check'; file: string; expected: IndexExpectation } | { task: 'digest'; file: string };

/**
 * Reads and hashes index files on a thread of their own: a channel's index file grows to about
 * 1.2 kB a message, and checking one of 100,000 messages before loading it (SHA-256 and a walk of
 * its structure) or hashing it after a save took 0.25–0.5 s, which the event loop would spend not
 * answering anyone. One thread per process, started on first use.
 */
class IndexFileThread {
  private readonly client = new WorkerClient<IndexFileRequest, IndexFileCheck | FileDigest>(new URL('./index-file-worker.js', import.meta.url), 'index file thread');

  async check(file: string, expected: IndexExpectation): Promise<IndexFileCheck> {
    try {
      return (await this.client.request({ task: 'check', file, expected })) as IndexFileCheck;
    } catch (error) {
      // The thread died or could not start: the file is not vouched for, so it is rebuilt.
      return { ok: false, reason: `index file unreadable (${error instanceof Error ? error.message : String(error)})` };
    }
  }

  async digest(file: string): Promise<FileDigest> {
    return (await this.client.request({ task: 'digest', file })) as FileDigest;
  }
}

let shared: IndexFileThread | undefined;

/** The process's index-file thread. */
export function indexFileThread(): IndexFileThread {
  shared ??= new IndexFileThread();
  return shared;
}
