import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { estimateEntryTokens } from '../src/context/token-estimate.js';
import { FAKE_GUILD_ID } from './fakes/fake-discord.js';
import { ALICE, BOB, BURST, GENERAL, isAgentRequest, LONG, MOD, QUIET, startTestBot, THREAD, waitUntil, type TestBot } from './discord-helpers.js';
import { makePng } from './support/images.js';
import { systemText } from './fakes/fake-prompt-cache.js';
import { startFakeEmbeddingsServer } from './fakes/fake-embeddings-server.js';

const MANAGE_MESSAGES = (1n << 13n).toString();
const MANAGE_CHANNELS = (1n << 4n).toString();

interface Block {
  type: string;
  text?: string;
  source?: { type: string; media_type: string; data: string };
}

function lastUserBlocks(body: { messages: Array<{ role: string; content: unknown }> }): Block[] {
  const last = [...body.messages].reverse().find((message) => message.role === 'user');
  return Array.isArray(last?.content) ? (last.content as Block[]) : [];
}

describe('files, reply context and user commands through Discord', () => {
  let bot: TestBot;
  before(async () => {
    bot = await startTestBot();
    // Agent turns answer "ok"; compaction workers write a short summary.
    bot.model.setDefault((request) => (isAgentRequest(request.body) ? { text: 'ok' } : { text: 'They talked about the launch.' }));
  });
  after(async () => {
    await bot.close();
  });

  const agentRequests = () => bot.model.requests.filter((request) => isAgentRequest(request.body));
  const entryOf = async (channelId: string, messageId: string) =>
    (await bot.app.runtime.liveContext(channelId)).entries.find((entry) => entry.messageId === messageId);
  const answered = async (channelId: string, messageId: string) => {
    await waitUntil(() => bot.discord.posted.some((message) => message.channelId === channelId && message.messageReference?.message_id === messageId), 'the answer', 15_000);
    await bot.adapter.idle();
  };
  async function command(channelId: string, userId: string, name: string, subcommand: string, options: Record<string, string> = {}, permissions?: string): Promise<string> {
    const sent = bot.discord.sendInteraction({ channelId, userId, name, subcommand, options, ...(permissions ? { permissions } : {}) });
    const reply = await bot.discord.waitForInteractionReply((candidate) => candidate.token === sent.token);
    assert.equal(reply.flags, 64, 'ephemeral');
    return reply.content ?? '';
  }

  test('an image attachment reaches the model as an image block, raises the estimate by width × height / 750, and is downloaded once', async () => {
    const png = makePng(1200, 900); // 1,440 tokens by the rule, under the cap
    const before = agentRequests().length;
    const id = bot.discord.sendMessage({
      channelId: GENERAL,
      authorId: ALICE,
      content: 'what is on this plan?',
      mentionsBot: true,
      attachments: [{ filename: 'plan.png', data: png, contentType: 'image/png', width: 1200, height: 900 }],
    });
    await answered(GENERAL, id);
    const request = agentRequests()[before]!.body;
    const image = lastUserBlocks(request).find((block) => block.type === 'image');
    assert.ok(image, 'an image block was sent');
    assert.deepEqual(image.source, { type: 'base64', media_type: 'image/png', data: png.toString('base64') });
    const entry = (await entryOf(GENERAL, id))!;
    assert.match(entry.content, /\[image: plan\.png, 1200×900, \d+ KB\]/);
    assert.equal(entry.tokens, estimateEntryTokens(entry) + 1440);
    assert.ok(bot.events.some((event) => event.type === 'attachments_resolved' && event.channel_id === GENERAL && event.images === 1 && event.tokens === 1440));

    // The next turn sends the image again from the data dir, without downloading it again.
    const next = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'and the colours?', mentionsBot: true });
    await answered(GENERAL, next);
    assert.ok(JSON.stringify(agentRequests().at(-1)!.body.messages).includes(png.toString('base64').slice(0, 64)));
    assert.equal(bot.discord.downloads.get('plan.png'), 1);
  });

  test('a text attachment reaches the model as text with its name; an oversized one is cut with a note; a binary one stays a placeholder', async () => {
    const before = agentRequests().length;
    const long = `${'line of the log file\n'.repeat(1500)}`; // 31,500 characters
    const id = bot.discord.sendMessage({
      channelId: QUIET,
      authorId: ALICE,
      content: 'please read these',
      mentionsBot: true,
      attachments: [
        { filename: 'notes.md', data: '# Launch\nShip on the 14th.', contentType: 'text/markdown; charset=utf-8' },
        { filename: 'server.log', data: long, contentType: 'text/plain' },
        { filename: 'blob.txt', data: Buffer.from([0x00, 0x9f, 0x92, 0x96]), contentType: 'text/plain' },
      ],
    });
    await answered(QUIET, id);
    const blocks = lastUserBlocks(agentRequests()[before]!.body);
    const texts = blocks.filter((block) => block.type === 'text').map((block) => block.text ?? '');
    assert.ok(texts.includes('Attached file notes.md:\n# Launch\nShip on the 14th.'));
    const log = texts.find((text) => text.startsWith('Attached file server.log:'))!;
    assert.ok(log.endsWith('[cut here: the file is longer than 20,000 characters]'));
    assert.equal(log.length, 'Attached file server.log:\n'.length + 20_000 + '\n[cut here: the file is longer than 20,000 characters]'.length);
    const entry = (await entryOf(QUIET, id))!;
    assert.match(entry.content, /\[file: notes\.md, \d+ B\]/);
    assert.match(entry.content, /\[file: server\.log, 31 KB, first 20,000 characters shown\]/);
    assert.match(entry.content, /\[attachment: blob\.txt, 4 B, not shown: not UTF-8 text\]/);
    assert.ok(!texts.some((text) => text.includes('Attached file blob.txt')));
  });

  test('a reply to a message that was compacted brings it into the turn from the archive', async () => {
    const original = bot.discord.sendMessage({ channelId: LONG, authorId: BOB, content: 'The launch codename is BLUEBIRD, keep it quiet.' });
    await waitUntil(async () => (await entryOf(LONG, original)) !== undefined, 'recorded');
    for (let index = 0; index < 10; index += 1) {
      const filler = bot.discord.sendMessage({ channelId: LONG, authorId: MOD, content: `unrelated chatter number ${index} about coffee, lunch and the weather this week` });
      await waitUntil(async () => (await entryOf(LONG, filler)) !== undefined, 'filler recorded');
    }
    const outcome = await bot.app.runtime.compactNow(LONG);
    assert.equal(outcome.status, 'completed');
    assert.equal(await entryOf(LONG, original), undefined, 'the original left the live context');

    const before = agentRequests().length;
    const question = bot.discord.sendMessage({ channelId: LONG, authorId: ALICE, content: 'what did you mean by this?', mentionsBot: true, replyToMessageId: original });
    await answered(LONG, question);
    const blocks = lastUserBlocks(agentRequests()[before]!.body);
    const context = blocks.find((block) => block.text?.includes('from the archive'));
    assert.ok(context, 'the archived message is in the turn');
    assert.match(context.text!, /bob: The launch codename is BLUEBIRD, keep it quiet\./);
  });

  test('/memory mine shows only the asking user’s memories, and they may forget their own without Manage Messages', async () => {
    const alice = bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: 'I prefer tea over coffee' });
    const bob = bot.discord.sendMessage({ channelId: BURST, authorId: BOB, content: 'I am vegetarian' });
    await waitUntil(async () => (await entryOf(BURST, alice)) !== undefined && (await entryOf(BURST, bob)) !== undefined, 'recorded');
    const location = { channelId: BURST, guildId: FAKE_GUILD_ID };
    const aliceMemory = await bot.app.memory.save({ location, content: 'Alice prefers tea over coffee', memoryType: 'preference', sourceIds: [alice] });
    const bobMemory = await bot.app.memory.save({ location, content: 'Bob is vegetarian', memoryType: 'identity', sourceIds: [bob] });
    const shared = await bot.app.memory.save({ location, content: 'The team orders lunch on Fridays', memoryType: 'fact', sourceIds: [alice, bob] });
    const elsewhere = await bot.app.memory.save({ location: { channelId: GENERAL, guildId: FAKE_GUILD_ID }, content: 'Alice runs the build', memoryType: 'fact', sourceIds: [alice] });

    const mine = await command(BURST, ALICE, 'memory', 'mine');
    assert.match(mine, new RegExp(`${aliceMemory.id} \\[preference\\] Alice prefers tea over coffee`));
    assert.ok(!mine.includes(bobMemory.id) && !mine.includes('vegetarian'), 'not another user’s memory');
    assert.ok(!mine.includes(shared.id), 'not a memory drawn from several people');
    assert.ok(!mine.includes(elsewhere.id), 'not a memory of another channel');
    const bobs = await command(BURST, BOB, 'memory', 'mine');
    assert.ok(bobs.includes(bobMemory.id) && !bobs.includes(aliceMemory.id));
    assert.match(await command(BURST, MOD, 'memory', 'mine'), /I remember nothing/);

    // Without Manage Messages: one's own memory yes, someone else's or a shared one no.
    assert.match(await command(BURST, ALICE, 'memory', 'forget', { id: bobMemory.id }), /Manage Messages/);
    assert.match(await command(BURST, ALICE, 'memory', 'forget', { id: shared.id }), /Manage Messages/);
    assert.match(await command(BURST, ALICE, 'memory', 'forget', { id: aliceMemory.id }), /^Forgot/);
    assert.match(await command(BURST, ALICE, 'memory', 'forget', { id: 'mem-not-a-number' }), /Manage Messages/);
    assert.match(await command(BURST, MOD, 'memory', 'forget', { id: shared.id }, MANAGE_MESSAGES), /^Forgot/);
  });

  test('/persona shows the configured persona; only Manage Channels sets one; it is used, persisted and shown in /context', async () => {
    assert.match(await command(GENERAL, ALICE, 'persona', 'show'), /configured persona \(the built-in default; no config file\):\nYou are Magpie/);
    assert.match(await command(GENERAL, ALICE, 'persona', 'set', { text: 'You are a pirate.' }), /Manage Channels/);
    assert.match(await command(GENERAL, MOD, 'persona', 'set', { text: '   ' }, MANAGE_CHANNELS), /Persona not changed: the persona is empty/);
    assert.match(await command(GENERAL, MOD, 'persona', 'set', { text: 'You are a cheerful pirate. Answer in pirate speak.' }, MANAGE_CHANNELS), /^Persona set/);
    assert.match(await command(GENERAL, ALICE, 'persona', 'show'), /set with \/persona by <@100000000000000004>.*\nYou are a cheerful pirate/s);
    const contextCommand = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'context' });
    const contextReply = await bot.discord.waitForInteractionReply((candidate) => candidate.token === contextCommand.token);
    assert.match(contextReply.content ?? '', /Persona: set with \/persona/);

    const before = agentRequests().length;
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'ahoy?', mentionsBot: true });
    await answered(GENERAL, id);
    assert.match(systemText(agentRequests()[before]!.body), /^You are a cheerful pirate\. Answer in pirate speak\./);
    // A thread follows its channel's persona.
    const inThread = bot.discord.sendMessage({ channelId: THREAD, authorId: ALICE, content: 'and here?', mentionsBot: true });
    await answered(THREAD, inThread);
    assert.match(systemText(agentRequests().at(-1)!.body), /^You are a cheerful pirate/);
    // Stored in the data dir: visible to the operator, and never in config.toml.
    const { listPersonas } = await import('../src/persona/index.js');
    assert.deepEqual((await listPersonas(bot.app.db)).map((persona) => [persona.channelId, persona.setBy]), [[GENERAL, MOD]]);

    assert.match(await command(GENERAL, MOD, 'persona', 'clear', {}, MANAGE_CHANNELS), /cleared/);
    assert.match(await command(GENERAL, MOD, 'persona', 'clear', {}, MANAGE_CHANNELS), /no persona of its own/);
    assert.deepEqual(await listPersonas(bot.app.db), []);
  });
});

test('a slash command whose work outlasts Discord’s 3 s is deferred in time and answered by editing the deferral', async () => {
  const embeddings = await startFakeEmbeddingsServer();
  embeddings.setDefault({ kind: 'vectors', dimension: 8 });
  const http = { url: embeddings.url, model: 'fake-embed', apiKeyEnv: 'NO_SUCH_KEY', dimension: 8, batchSize: 16, timeoutMs: 10_000, maxRetries: 0 };
  const bot = await startTestBot({ memory: { embedder: 'http', http } });
  try {
    // The query's embedding takes longer than Discord waits for an answer.
    embeddings.setDefault({ kind: 'delay', ms: 3_200, dimension: 8 });
    const asked = Date.now();
    const sent = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'memory', subcommand: 'search', options: { query: 'launch date' } });
    const deferral = await bot.discord.waitForInteractionReply((reply) => reply.token === sent.token, { timeoutMs: 10_000 });
    const deferredAfter = Date.now() - asked;
    assert.equal(deferral.kind, 'callback');
    assert.equal(deferral.type, 5, 'a deferred answer ("thinking…")');
    assert.equal(deferral.flags, 64, 'ephemeral');
    assert.ok(deferredAfter < 3_000, `deferred within Discord's 3 s (after ${deferredAfter} ms)`);
    const answer = await bot.discord.waitForInteractionReply((reply) => reply.token === sent.token && reply.kind === 'edit', { timeoutMs: 10_000 });
    assert.match(answer.content ?? '', /\S/, 'the answer fills the deferral');
    assert.equal(bot.discord.interactionReplies.filter((reply) => reply.token === sent.token && reply.kind === 'callback').length, 1, 'answered once');
  } finally {
    await bot.close();
    await embeddings.close();
  }
});
