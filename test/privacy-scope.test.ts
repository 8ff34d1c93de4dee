/**
 * Guild scope that respects Discord: memories cross only between channels with the same view
 * permissions (from the fake Discord's permission overwrites), private channels and private
 * threads never leak into public ones, and a channelUpdate that changes the overwrites changes
 * what is shared at once, for memories saved long before too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FAKE_GUILD_ID, VIEW_CHANNEL } from './fakes/fake-discord.js';
import { ALICE, GENERAL, QUIET, ROLE_MODS, isAgentRequest, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';

const SECRET = '700000000000000101';
const PRIVATE_THREAD = '700000000000000102';
const PUBLIC_THREAD = '700000000000000103';

/** @everyone may not view; the mods role may. */
const MODS_ONLY = [
  { id: FAKE_GUILD_ID, type: 0 as const, allow: '0', deny: VIEW_CHANNEL },
  { id: ROLE_MODS, type: 0 as const, allow: VIEW_CHANNEL, deny: '0' },
];

describe('guild scope follows Discord view permissions', () => {
  let bot: TestBot;
  before(async () => {
    bot = await startTestBot({
      memory: { scope: 'guild' },
      extraChannels: [
        { id: SECRET, name: 'mods-only', type: 0, overwrites: MODS_ONLY },
        { id: PRIVATE_THREAD, name: 'private-thread', type: 12, parentId: GENERAL },
        { id: PUBLIC_THREAD, name: 'public-thread', type: 11, parentId: GENERAL },
      ],
    });
  });
  after(async () => bot.close());

  const location = (channelId: string) => ({ channelId, guildId: FAKE_GUILD_ID });
  const seen = async (channelId: string) =>
    (await bot.app.memory.search({ location: location(channelId), query: 'codeword', kind: 'memory', limit: 20 })).map((result) => result.content);

  test('a private channel and a private thread never leak into public channels; public ones share', async () => {
    await bot.app.memory.save({ location: location(GENERAL), content: 'The public codeword is heliotrope', memoryType: 'fact' });
    await bot.app.memory.save({ location: location(SECRET), content: 'The mods codeword is obsidian', memoryType: 'fact' });
    await bot.app.memory.save({ location: location(PRIVATE_THREAD), content: 'The thread codeword is vermilion', memoryType: 'fact' });
    await bot.app.memory.save({ location: location(PUBLIC_THREAD), content: 'The open thread codeword is saffron', memoryType: 'fact' });

    // The bot records every channel's view permissions as it starts; until a channel's are
    // recorded it shares with no one (by design), so the first search waits for that.
    await waitUntil(async () => (await seen(QUIET)).some((content) => content.includes('heliotrope')), 'public channels share');
    const inQuiet = await seen(QUIET);
    assert.ok(inQuiet.some((content) => content.includes('heliotrope')), 'public channels share');
    assert.ok(inQuiet.some((content) => content.includes('saffron')), 'a public thread shares with its parent’s peers');
    assert.ok(!inQuiet.some((content) => content.includes('obsidian')), 'the private channel does not leak');
    assert.ok(!inQuiet.some((content) => content.includes('vermilion')), 'the private thread does not leak');

    const inSecret = await seen(SECRET);
    assert.ok(inSecret.some((content) => content.includes('obsidian')));
    assert.ok(!inSecret.some((content) => content.includes('heliotrope')), 'different view permissions: nothing crosses either way');
    assert.ok(!(await seen(GENERAL)).some((content) => content.includes('vermilion')), 'the parent does not see its private thread');
    // The same rule for listing.
    assert.ok(!(await bot.app.memory.list({ location: location(QUIET), kind: 'memory' })).some((record) => record.content.includes('obsidian')));

    // Through the model's own tool, in a turn.
    bot.model.setDefault((request) =>
      isAgentRequest(request.body) && !JSON.stringify(request.body.messages).includes('tool_result')
        ? { toolUse: [{ name: 'memory_search', input: { query: 'codeword' } }] }
        : { text: 'Here is what I know.' },
    );
    const id = bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: 'what codewords do you know?', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    await bot.adapter.idle();
    const sent = JSON.stringify(bot.model.requests.at(-1)!.body);
    assert.ok(sent.includes('heliotrope'));
    assert.ok(!sent.includes('obsidian') && !sent.includes('vermilion'));
  });

  test('changed overwrites (channelUpdate) change what is shared, for memories saved before', async () => {
    bot.discord.setOverwrites(SECRET, []);
    await waitUntil(async () => (await seen(QUIET)).some((content) => content.includes('obsidian')), 'opened channel shares');
    bot.discord.setOverwrites(QUIET, MODS_ONLY);
    await waitUntil(async () => !(await seen(QUIET)).some((content) => content.includes('heliotrope')), 'closed channel stops seeing');
    assert.deepEqual(await seen(QUIET), [], 'no other channel has these view permissions now');
    // Closing the parent takes its public threads along; its private thread stays its own.
    bot.discord.setOverwrites(GENERAL, MODS_ONLY);
    await waitUntil(async () => (await seen(QUIET)).some((content) => content.includes('saffron')), 'the public thread follows its parent');
    assert.ok((await seen(QUIET)).some((content) => content.includes('heliotrope')), 'same overwrites now: shared');
    assert.ok(!(await seen(QUIET)).some((content) => content.includes('vermilion')));
  });
});
