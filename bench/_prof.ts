import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp } from '../src/app/index.js';
import { EventStream } from '../src/common/events.js';
import { testConfig } from '../test/discord-helpers.js';
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-prof-'));
const config = testConfig({ baseUrl: 'http://127.0.0.1:1', dataDir, defaults: { replyPolicy: 'listen' } });
const app = await openApp({ config, env: {}, events: new EventStream() });
const N = 5000;
for (let i = 0; i < 1000; i++) await app.runtime.ingest({ messageId: `w${i}`, channelId: String(700000000000000000n + BigInt(i)), guildId: '8', authorId: '1', authorName: 'a', role: 'user', content: 'warm', createdAt: Date.now() });
const t = process.hrtime.bigint();
const all = [];
for (let i = 0; i < N; i++) {
  const p = app.runtime.ingest({ messageId: `d${i}`, channelId: String(700000000000000000n + BigInt(i % 1000)), guildId: '8', authorId: '1', authorName: 'a', role: 'user', content: `message ${i}: the watering rota moves to thursdays from next week`, createdAt: Date.now() });
  if (process.env.SERIAL) await p; else all.push(p);
}
await Promise.all(all);
console.log('msg/s', N / (Number(process.hrtime.bigint() - t) / 1e9));
await app.close();
