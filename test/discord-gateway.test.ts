import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createDiscordClient } from '../src/discord/client.js';
import { startFakeDiscord } from './fakes/fake-discord.js';
import { waitUntil } from './discord-helpers.js';

const ALICE = '100000000000000001';
const GENERAL = '700000000000000001';

test('the real client heartbeats, gets ACKs, and resumes after a drop with missed events replayed', async () => {
  const fake = await startFakeDiscord({
    heartbeatIntervalMs: 100,
    users: [{ id: ALICE, username: 'alice' }],
    channels: [{ id: GENERAL, name: 'general', type: 0 }],
  });
  const client = createDiscordClient({ restApi: fake.restApi });
  const seen: string[] = [];
  client.on('messageCreate', (message) => seen.push(message.content));
  try {
    const ready = new Promise<void>((resolve) => client.once('clientReady', () => resolve()));
    await client.login('token');
    await ready;
    assert.equal(client.guilds.cache.get('800000000000000001')?.channels.cache.get(GENERAL)?.name, 'general');
    await waitUntil(() => fake.heartbeats >= 2 && client.ws.ping >= 0, 'heartbeats acknowledged');

    fake.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'before' });
    await waitUntil(() => seen.includes('before'), 'first message');
    fake.dropConnection();
    fake.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'while away 1' });
    fake.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'while away 2' });
    await waitUntil(() => seen.includes('while away 2'), 'replayed messages', 10_000);
    assert.deepEqual(seen, ['before', 'while away 1', 'while away 2']);
    const resume = fake.handshakes.find((handshake) => handshake.op === 6);
    assert.ok(resume, 'RESUME sent');
    assert.equal(fake.handshakes.filter((handshake) => handshake.op === 2).length, 1, 'identified once');
  } finally {
    await client.destroy();
    await fake.close();
  }
});
