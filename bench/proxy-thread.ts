/**
 * The delaying PostgreSQL proxy in a thread of its own, for ingest benchmarks: a database on
 * another host costs the bot's event loop nothing while it is far away, so neither should the
 * proxy that stands in for the distance. Tests keep the proxy in-process (they pause and cut it).
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { nextReply } from './worker-replies.js';
import { startDelayedPostgres } from '../test/support/tcp-delay-proxy.js';

interface ProxyThreadOptions {
  proxiedUrl: string;
  delayMs: number;
}

type Reply = { kind: 'ready'; url: string } | { kind: 'counts'; statements: number; exchanges: number };

export interface ProxyThread {
  /** The URL to connect to instead of the database's own. */
  url: string;
  /**
   * Counted so far: `statements`, each answer the client asked for (a simple query or an
   * extended-protocol Sync); `exchanges`, the times the client spoke again after the server had
   * answered: the round trips it waited for (statements pipelined in one write share one).
   */
  counts(): Promise<{ statements: number; exchanges: number }>;
  close(): Promise<void>;
}

export async function startProxyThread(databaseUrl: string, delayMs: number): Promise<ProxyThread> {
  const worker = new Worker(new URL(import.meta.url), { workerData: { proxiedUrl: databaseUrl, delayMs } satisfies ProxyThreadOptions });
  const next = nextReply<Reply>(worker);
  const ready = await next();
  if (ready.kind !== 'ready') throw new Error('proxy thread did not start');
  return {
    url: ready.url,
    async counts() {
      const reply = next();
      worker.postMessage('counts');
      const counts = await reply;
      if (counts.kind !== 'counts') throw new Error('proxy thread answered out of turn');
      return { statements: counts.statements, exchanges: counts.exchanges };
    },
    async close() {
      await worker.terminate();
    },
  };
}

async function serve(options: ProxyThreadOptions): Promise<void> {
  const proxy = await startDelayedPostgres(options.proxiedUrl, options.delayMs);
  const port = parentPort!;
  port.on('message', () => port.postMessage({ kind: 'counts', statements: proxy.roundTrips(), exchanges: proxy.exchanges() } satisfies Reply));
  port.postMessage({ kind: 'ready', url: proxy.url } satisfies Reply);
}

if (!isMainThread && parentPort && (workerData as { proxiedUrl?: unknown } | undefined)?.proxiedUrl) {
  await serve(workerData as ProxyThreadOptions);
}
