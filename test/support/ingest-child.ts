/**
 * A child process for the durability test: ingests messages over many channels through the real
 * runtime as fast as it can and prints each message id once its ingest resolved ("acknowledged").
 * The parent kills it with SIGKILL mid-stream and checks every acknowledged message survived.
 */
import { openApp } from '../../src/app/index.js';
import { DEFAULTS } from '../../src/config/defaults.js';
import { appEnv, withTestStorage } from './storage.js';

const dataDir = process.argv[2]!;
// SQLite's group commits on the writer thread or on the event loop, as the parent asks.
const writerThread = (process.argv[3] ?? 'auto') as 'auto' | 'on' | 'off';
const channels = 50;
const app = await openApp({
  config: withTestStorage({ ...DEFAULTS, storage: { ...DEFAULTS.storage, writerThread }, memory: { ...DEFAULTS.memory, dataDir } }),
  env: appEnv(),
});
let index = 0;
// Many ingests in flight at once, as the gateway delivers them: they share group commits.
for (;;) {
  const batch: Array<Promise<void>> = [];
  for (let count = 0; count < 40; count += 1, index += 1) {
    const messageId = `msg-${index}`;
    batch.push(
      app.runtime
        .ingest({
          messageId,
          channelId: `chan-${index % channels}`,
          guildId: 'g1',
          authorId: 'u1',
          authorName: 'alice',
          role: 'user',
          content: `durable note ${index} marmalade${index}`,
          createdAt: Date.now(),
        })
        .then(() => {
          process.stdout.write(`${messageId}\n`);
        }),
    );
  }
  await Promise.all(batch);
}
