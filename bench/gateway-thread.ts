/**
 * The fake Discord in a thread of its own, for ingest benchmarks: the real Discord runs on
 * other machines, so its cost (building and framing each dispatch, keeping its replay log) must
 * not be charged to the bot's event loop. The bot's side is unchanged: discord.js connects to
 * it over loopback exactly as it connects to the in-process fake.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { nextReply } from './worker-replies.js';
import { startFakeDiscord, type FakeChannel, type FakeUser } from '../test/fakes/fake-discord.js';

interface GatewayThreadOptions {
  users: FakeUser[];
  channels: FakeChannel[];
}

/** A burst to send: `count` messages by `authorId`, channel `index % channels`. */
interface Burst {
  count: number;
  authorId: string;
  /** The message's text; `{n}` is replaced by its number. */
  content: string;
}

type Reply = { kind: 'ready'; restApi: string } | { kind: 'sent'; count: number };

export interface GatewayThread {
  restApi: string;
  /** Sends a burst of messages round-robin over the channels; resolves once all are written to the socket. */
  sendBurst(burst: Burst): Promise<void>;
  close(): Promise<void>;
}

export async function startGatewayThread(options: GatewayThreadOptions): Promise<GatewayThread> {
  const worker = new Worker(new URL(import.meta.url), { workerData: options });
  const next = nextReply<Reply>(worker);
  const ready = await next();
  if (ready.kind !== 'ready') throw new Error('gateway thread did not start');
  return {
    restApi: ready.restApi,
    async sendBurst(burst) {
      const sent = next();
      worker.postMessage(burst);
      await sent;
    },
    async close() {
      await worker.terminate();
    },
  };
}

async function serve(options: GatewayThreadOptions): Promise<void> {
  const discord = await startFakeDiscord({ users: options.users, channels: options.channels, echoBotMessages: false });
  const port = parentPort!;
  port.on('message', async (burst: Burst) => {
    for (let index = 0; index < burst.count; index += 1) {
      discord.sendMessage({
        channelId: options.channels[index % options.channels.length]!.id,
        authorId: burst.authorId,
        content: burst.content.replace('{n}', String(index)),
      });
      // Let the socket drain now and then so the fake's own buffering is not what is measured.
      if (index % 250 === 249) await new Promise((resolve) => setImmediate(resolve));
    }
    port.postMessage({ kind: 'sent', count: burst.count } satisfies Reply);
  });
  port.postMessage({ kind: 'ready', restApi: discord.restApi } satisfies Reply);
}

if (!isMainThread && parentPort && (workerData as { channels?: unknown } | undefined)?.channels) {
  await serve(workerData as GatewayThreadOptions);
}
