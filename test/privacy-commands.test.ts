/**
 * Forgetting from chat: `/memory forget-me` erases what the asking user wrote everywhere, after
 * a confirmation code; `/memory forget` on an archived message deletes it like a Discord
 * delete. And `memory_save`'s named sources are checked against what the work was given.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openTestStore, type OpenedStore } from './support/memory-store.js';
import { createMemoryTools } from '../src/memory/index.js';
import { inferSources } from '../src/memory/provenance.js';
import { ChannelRuntime } from '../src/channel/index.js';
import { EventStream } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { LiveConfig } from '../src/config/live-config.js';
import { testConfig, userMessage } from './compaction-support.js';
import { ALICE, BOB, DM_ALICE, GENERAL, MOD, QUIET, THREAD, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';

describe('forgetting from Discord', () => {
  let bot: TestBot;
  before(async () => {
    bot = await startTestBot({ discord: { dmUsers: [ALICE] } });
    bot.model.setDefault({ text: 'Hello.' });
  });
  after(async () => bot.close());

  const command = async (userId: string, subcommand: string, options: Record<string, string> = {}, channelId = GENERAL, permissions?: string) => {
    const sent = bot.discord.sendInteraction({ channelId, userId, name: 'memory', subcommand, options, ...(permissions ? { permissions } : {}) });
    const reply = await bot.discord.waitForInteractionReply((candidate) => candidate.token === sent.token);
    assert.equal(reply.flags, 64, 'ephemeral');
    return reply.content ?? '';
  };
  const authored = async (userId: string) =>
    ((await bot.app.db.prepare(`SELECT COUNT(*) AS total FROM history_entries WHERE author_id = ?`).get(userId)) as { total: number }).total;

  test('/memory forget-me asks for a code, refuses a wrong one, then erases everything the user wrote', async () => {
    const ids = [
      bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'alice says gooseberry one' }),
      bot.discord.sendMessage({ channelId: THREAD, authorId: ALICE, content: 'alice says gooseberry two' }),
      bot.discord.sendMessage({ channelId: DM_ALICE, authorId: ALICE, content: 'alice says gooseberry three' }),
      bot.discord.sendMessage({ channelId: QUIET, authorId: BOB, content: 'bob says gooseberry four' }),
    ];
    await waitUntil(async () => ((await bot.app.db.prepare(`SELECT COUNT(*) AS total FROM history_entries WHERE message_id IN (?, ?, ?, ?)`).get(...ids)) as { total: number }).total === 4, 'recorded');

    const ask = await command(ALICE, 'forget-me');
    const code = /code:([0-9A-F]{6})/.exec(ask)?.[1];
    assert.ok(code, ask);
    assert.equal(await authored(ALICE), 3, 'nothing erased before the confirmation');
    assert.match(await command(ALICE, 'forget-me', { code: 'zz' }), /not a confirmation code/);
    assert.match(await command(ALICE, 'forget-me', { code: code === 'AAAAAA' ? 'BBBBBB' : 'AAAAAA' }), /does not match/);
    // Someone else cannot use Alice's code.
    assert.match(await command(BOB, 'forget-me', { code }), /does not match/);
    assert.equal(await authored(ALICE), 3);

    const done = await command(ALICE, 'forget-me', { code: code.toLowerCase() });
    assert.match(done, /erased 3 messages in 3 channels/);
    assert.equal(await authored(ALICE), 0);
    assert.equal(await authored(BOB), 1, 'others keep what they wrote');
    const copies = (await bot.app.db.prepare(`SELECT COUNT(*) AS total FROM memory_items WHERE content LIKE '%alice says gooseberry%'`).get()) as { total: number };
    assert.equal(copies.total, 0);
    const audit = bot.events.find((event) => event.type === 'user_erased')!;
    assert.deepEqual(
      { requested_from: audit.requested_from, channels: audit.channels, messages: audit.messages },
      { requested_from: 'discord', channels: 3, messages: 3 },
    );
    assert.ok(!JSON.stringify(audit).includes(ALICE) && !JSON.stringify(audit).includes('gooseberry'), 'counts only');
    // The code was used up.
    assert.match(await command(ALICE, 'forget-me', { code }), /does not match/);
  });

  test('/memory forget on an archived message deletes it from history too', async () => {
    const id = bot.discord.sendMessage({ channelId: QUIET, authorId: BOB, content: 'the gate code is tamarind' });
    await waitUntil(async () => (await bot.app.runtime.liveContext(QUIET)).entries.some((entry) => entry.messageId === id), 'recorded');
    const row = await (async () => {
      let found: { rowid: number } | undefined;
      await waitUntil(async () => {
        found = (await bot.app.db.prepare(`SELECT rowid FROM memory_items WHERE message_id = ? AND kind = 'transcript'`).get(id)) as { rowid: number } | undefined;
        return found !== undefined;
      }, 'archived');
      return found!;
    })();
    assert.match(await command(BOB, 'forget', { id: `msg-${row.rowid}` }, QUIET), /Manage Messages/);
    assert.match(await command(MOD, 'forget', { id: `msg-${row.rowid}` }, GENERAL, '8192'), /No archived message/, 'not from another channel');
    assert.match(await command(MOD, 'forget', { id: `msg-${row.rowid}` }, QUIET, '8192'), /Forgot archived message/);
    assert.ok(!(await bot.app.runtime.liveContext(QUIET)).entries.some((entry) => entry.messageId === id), 'gone from the live context');
    assert.ok(!JSON.stringify(await bot.app.runtime.buildModelRequest(QUIET, { tools: [], maxTokens: 10 })).includes('tamarind'));
  });

  test('/memory forget-me erases a user with hundreds of messages in one channel, and a search result that quoted one', async () => {
    const count = 600;
    for (let index = 0; index < count; index += 1) {
      bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: index === 7 ? 'my locker code is quince 4242' : `alice note ${index}` });
      if (index % 100 === 99) await new Promise((resolve) => setImmediate(resolve));
    }
    const archived = `SELECT COUNT(*) AS total FROM memory_items WHERE kind = 'transcript' AND content LIKE '%quince 4242%'`;
    await waitUntil(async () => (await authored(ALICE)) === count, 'recorded', 30_000);
    await waitUntil(async () => ((await bot.app.db.prepare(archived).get()) as { total: number }).total === 1, 'archived', 30_000);
    // Bob's question is answered by a search whose result, kept in history, quotes Alice.
    bot.model.setDefault((request) => {
      const searched = JSON.stringify(request.body.messages.at(-1)).includes('tool_result');
      if (!searched && JSON.stringify(request.body.messages).includes('locker code?')) return { toolUse: [{ name: 'memory_search', input: { query: 'locker code quince' } }] };
      return { text: 'Hello.' };
    });
    const asked = bot.discord.sendMessage({ channelId: QUIET, authorId: BOB, content: 'what was the locker code?', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === asked);
    const quoting = `SELECT COUNT(*) AS total FROM history_entries WHERE kind = 'tool_result' AND content LIKE '%quince 4242%'`;
    await waitUntil(async () => ((await bot.app.db.prepare(quoting).get()) as { total: number }).total === 1, 'the search result quoting it');

    const code = /code:([0-9A-F]{6})/.exec(await command(ALICE, 'forget-me', {}, QUIET))![1]!;
    assert.match(await command(ALICE, 'forget-me', { code }, QUIET), new RegExp(`erased ${count} messages in 1 channel`));
    assert.equal(await authored(ALICE), 0);
    assert.equal(((await bot.app.db.prepare(quoting).get()) as { total: number }).total, 0, 'the quote left the search result');
    assert.ok(!JSON.stringify(await bot.app.runtime.buildModelRequest(QUIET, { tools: [], maxTokens: 10 })).includes('quince 4242'));
  });
});

describe('memory_save sources', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore();
  });
  after(async () => opened.close());

  test('named sources must come from what the work was given; garbage gets a tool error', async () => {
    const { memorySave } = createMemoryTools(opened.store);
    const worker = {
      channelId: 'c-src',
      sourceCandidates: [
        { messageId: 'm1', content: 'Priya moved the launch to Friday' },
        { messageId: 'm2', content: 'lunch was good' },
      ],
    };
    const save = (input: unknown, context: Parameters<typeof memorySave.run>[1] = worker) => memorySave.run(input, context);
    const base = { content: 'The launch is on Friday', memory_type: 'decision' };
    for (const [sourceIds, problem] of [
      ['m1', /source_ids must be an array/],
      [[''], /source_ids must be an array/],
      [[7], /source_ids must be an array/],
      [['m9'], /"m9" is not a message of the conversation/],
      [Array.from({ length: 51 }, (_, index) => `m${index}`), /at most 50/],
    ] as const) {
      const outcome = await save({ ...base, source_ids: sourceIds });
      assert.equal(outcome.isError, true, JSON.stringify(sourceIds));
      assert.match(outcome.content, problem);
    }
    const named = await save({ ...base, source_ids: ['msg m1'] });
    assert.equal(named.isError, false, named.content);
    const inferred = await save({ content: 'Priya owns the launch date', memory_type: 'fact' });
    assert.equal(inferred.isError, false);
    const records = await opened.store.list({ location: { channelId: 'c-src' }, kind: 'memory' });
    assert.deepEqual(records.find((record) => record.content.includes('Priya owns'))?.sourceIds, ['m1'], 'inferred from shared words');
    assert.deepEqual(records.find((record) => record.content.includes('launch is on Friday'))?.sourceIds, ['m1']);

    // A channel turn: only ids of its live context or of what its searches showed.
    const turn = { channelId: 'c-src', sourceMessageIds: ['t1'], isKnownSource: (id: string) => id === 'live-1', seenSourceIds: new Set(['seen-1']) };
    assert.equal((await save({ ...base, content: 'Turn fact one', source_ids: ['live-1', 'seen-1'] }, turn)).isError, false);
    assert.equal((await save({ ...base, content: 'Turn fact two', source_ids: ['elsewhere'] }, turn)).isError, true);
  });

  test('a message deleted while a worker drew from it is no source: the save is refused or keeps the rest', async () => {
    const runtime = new ChannelRuntime({
      db: opened.db,
      memory: opened.store,
      config: new LiveConfig(testConfig()),
      events: new EventStream(),
      summarizer: createExtractiveSummarizer(),
    });
    try {
      for (let index = 0; index < 3; index += 1) await runtime.ingest(userMessage('c-race', index));
      const { memorySave } = createMemoryTools(opened.store);
      const worker = { channelId: 'c-race', sourceCandidates: [0, 1, 2].map((index) => ({ messageId: `m${index}`, content: `Message ${index}` })) };
      // The worker read m0 and m1; m0 is deleted before its save lands.
      await runtime.deleteMessages('c-race', ['m0']);
      const refused = await memorySave.run({ content: 'Drawn from the deleted one', memory_type: 'fact', source_ids: ['m0'] }, worker);
      assert.equal(refused.isError, true);
      assert.match(refused.content, /were deleted; it was not saved/);
      const kept = await memorySave.run({ content: 'Drawn from both', memory_type: 'fact', source_ids: ['m0', 'm1'] }, worker);
      assert.equal(kept.isError, false, kept.content);
      const record = (await opened.store.list({ location: { channelId: 'c-race' }, kind: 'memory' })).find((candidate) => candidate.content === 'Drawn from both');
      assert.deepEqual(record?.sourceIds, ['m1']);
    } finally {
      await runtime.close();
    }
  });

  test('inference falls back to every candidate when nothing is shared', () => {
    const candidates = [
      { messageId: 'a', content: 'alpha beta' },
      { messageId: 'b', content: 'gamma delta' },
    ];
    assert.deepEqual(inferSources('something unrelated entirely', candidates), ['a', 'b']);
    assert.deepEqual(inferSources('gamma rays', candidates), ['b']);
  });
});
