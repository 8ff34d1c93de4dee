import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createDiscordClient } from '../src/discord/client.js';
import { startFakeDiscord } from './fakes/fake-discord.js';

test('the real discord.js client connects to the fake gateway', async () => {
  const fake = await startFakeDiscord({
    users: [{ id: '100000000000000001', username: 'alice' }],
    channels: [{ id: '700000000000000001', name: 'general', type: 0 }],
  });
  const client = createDiscordClient({ restApi: fake.restApi });
  try {
    const ready = new Promise<void>((resolve) => client.once('clientReady', () => resolve()));
    await client.login('test-token');
    await ready;
    assert.equal(client.user?.id, '900000000000000001');
    const got = new Promise<string>((resolve) => client.on('messageCreate', (m) => resolve(m.content)));
    fake.sendMessage({ channelId: '700000000000000001', authorId: '100000000000000001', content: 'hi', mentionsBot: true });
    assert.match(await got, /hi/);
  } finally {
    await client.destroy();
    await fake.close();
  }
});
