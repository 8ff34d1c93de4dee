/**
 * Edge cases of the bot on a fake Discord: what a model or a user can send that the happy path
 * never does, and the scoping of slash commands between channels and DMs.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FAKE_BOT_ID, FAKE_GUILD_ID } from './fakes/fake-discord.js';
import {
  ALICE,
  CAROL,
  DM_ALICE,
  DM_CAROL,
  GENERAL,
  isAgentRequest,
  LONG,
  lastUserText,
  MOD,
  QUIET,
  ROLE_MODS,
  startTestBot,
  waitUntil,
  type TestBot,
} from './discord-helpers.js';

const MANAGE_MESSAGES = '8192';

describe('edge cases on a fake Discord', () => {
  let bot: TestBot;

  before(async () => {
    bot = await startTestBot({ discord: { dmUsers: [ALICE] } });
    bot.model.setDefault((request) =>
      isAgentRequest(request.body) ? { text: `echo: ${lastUserText(request.body).slice(-60)}` } : { text: 'A short summary.' },
    );
  });

  after(async () => {
    await bot.close();
  });

  const entryOf = async (channelId: string, messageId: string) =>
    (await bot.app.runtime.liveContext(channelId)).entries.find((entry) => entry.messageId === messageId);

  const command = async (channelId: string, userId: string, subcommand: string, options: Record<string, string>, permissions?: string) => {
    const sent = bot.discord.sendInteraction({
      channelId,
      userId,
      name: 'memory',
      subcommand,
      options,
      ...(permissions ? { permissions } : {}),
    });
    const reply = await bot.discord.waitForInteractionReply((candidate) => candidate.token === sent.token);
    return reply.content ?? '';
  };

  test('a reply full of mass mentions pings nobody but users', async () => {
    bot.model.enqueue({ text: `@everyone @here <@&${ROLE_MODS}> look at this, <@${MOD}>` });
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'ping them all', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    const request = bot.discord.requests.find(
      (recorded) => recorded.method === 'POST' && (recorded.body as { content?: string })?.content === posted.content,
    );
    const allowed = (request?.body as { allowed_mentions?: { parse?: string[]; roles?: string[] } }).allowed_mentions;
    assert.ok(allowed, 'allowed_mentions sent in the REST body');
    assert.deepEqual(allowed.parse, ['users']);
    assert.equal(allowed.roles, undefined);
  });

  test('/memory forget cannot reach a memory of another channel or of a DM', async () => {
    const general = await bot.app.memory.save({
      location: { channelId: GENERAL, guildId: FAKE_GUILD_ID },
      content: 'The release train leaves every second Thursday.',
      memoryType: 'fact',
    });
    const privateMemory = await bot.app.memory.save({
      location: { channelId: DM_ALICE, dmUserId: ALICE },
      content: 'Alice is allergic to peanuts.',
      memoryType: 'identity',
    });
    const stillThere = async (id: string) => (await bot.app.memory.list({ limit: 10_000 })).some((record) => record.id === id);

    // A moderator of another channel, and a DM user (who manages their own DM), may not.
    const fromQuiet = await command(QUIET, MOD, 'forget', { id: general.id }, MANAGE_MESSAGES);
    assert.doesNotMatch(fromQuiet, /^Forgot/);
    const fromDm = await command(DM_ALICE, ALICE, 'forget', { id: general.id });
    assert.doesNotMatch(fromDm, /^Forgot/);
    const dmFromGuild = await command(GENERAL, MOD, 'forget', { id: privateMemory.id }, MANAGE_MESSAGES);
    assert.doesNotMatch(dmFromGuild, /^Forgot/);
    assert.ok(await stillThere(general.id), 'the channel memory survives');
    assert.ok(await stillThere(privateMemory.id), 'the DM memory survives');

    // Where they belong, they can be forgotten.
    assert.match(await command(GENERAL, MOD, 'forget', { id: general.id }, MANAGE_MESSAGES), /^Forgot/);
    assert.match(await command(DM_ALICE, ALICE, 'forget', { id: privateMemory.id }), /^Forgot/);
    assert.ok(!(await stillThere(general.id)) && !(await stillThere(privateMemory.id)));
  });

  test('/memory search in a guild channel never shows a DM or another channel', async () => {
    await bot.app.memory.save({
      location: { channelId: DM_ALICE, dmUserId: ALICE },
      content: 'Alice keeps her spare key under the blue flowerpot.',
      memoryType: 'fact',
    });
    await bot.app.memory.save({
      location: { channelId: QUIET, guildId: FAKE_GUILD_ID },
      content: 'The quiet channel keeps its spare key in the blue drawer.',
      memoryType: 'fact',
    });
    const inGeneral = await command(GENERAL, ALICE, 'search', { query: 'spare key blue flowerpot drawer' });
    assert.doesNotMatch(inGeneral, /Alice keeps|quiet channel keeps/);
    const inDm = await command(DM_ALICE, ALICE, 'search', { query: 'spare key blue flowerpot' });
    assert.match(inDm, /Alice keeps her spare key/);
    assert.doesNotMatch(inDm, /quiet channel keeps/);
  });

  test('a slash command that fails is still answered, briefly and without internals', async () => {
    const tooLong = await command(GENERAL, ALICE, 'search', { query: `needle ${'hay '.repeat(900)}` });
    assert.ok(tooLong.length > 0 && tooLong.length < 400, tooLong);
    assert.doesNotMatch(tooLong, /InputError|at \S+\.js/);
  });

  test('turns queued behind a running one respect the daily budget it used up', async () => {
    const current = bot.app.config.current();
    bot.app.config.replace({ ...current, channels: { ...current.channels, [LONG]: { ...current.defaults, dailyTokenBudget: 1 } } });
    try {
      bot.model.enqueue({ delayMs: 300, then: { text: 'the only answer today' } });
      const first = bot.discord.sendMessage({ channelId: LONG, authorId: ALICE, content: 'first question', mentionsBot: true });
      await waitUntil(() => bot.model.inFlight > 0, 'first turn thinking');
      const second = bot.discord.sendMessage({ channelId: LONG, authorId: MOD, content: 'second question', mentionsBot: true });
      const answer = await bot.discord.waitForPost((message) => message.messageReference?.message_id === first);
      assert.equal(answer.content, 'the only answer today');
      const notice = await bot.discord.waitForPost((message) => message.messageReference?.message_id === second);
      assert.match(notice.content, /budget for today/);
    } finally {
      bot.app.config.replace(current);
    }
  });

  test('a slash command in the DM of an unlisted user is refused', async () => {
    const reply = await command(DM_CAROL, CAROL, 'search', { query: 'anything' });
    assert.match(reply, /not available/);
  });

  test('an edit that carries no content (embeds unfurled) keeps the stored text', async () => {
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'see https://example.invalid/page for details' });
    await waitUntil(async () => (await entryOf(GENERAL, id)) !== undefined, 'recorded');
    bot.discord.dispatch('MESSAGE_UPDATE', {
      id,
      channel_id: GENERAL,
      guild_id: FAKE_GUILD_ID,
      embeds: [{ type: 'link', url: 'https://example.invalid/page', title: 'A page' }],
    });
    const marker = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'after the unfurl' });
    await waitUntil(async () => (await entryOf(GENERAL, marker)) !== undefined, 'later message recorded');
    await bot.adapter.idle();
    assert.match((await entryOf(GENERAL, id))?.content ?? '', /see https:\/\/example\.invalid\/page for details/);
  });

  test('deletes of unknown messages and channels are harmless; a mixed bulk delete removes the known ones', async () => {
    const keep = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'keep me' });
    const gone = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'delete me' });
    await waitUntil(async () => (await entryOf(GENERAL, keep)) !== undefined && (await entryOf(GENERAL, gone)) !== undefined, 'recorded');
    const failedBefore = bot.events.filter((event) => event.type === 'discord_event_failed').length;
    bot.discord.dispatch('MESSAGE_DELETE', { id: '123456789012345678', channel_id: GENERAL, guild_id: FAKE_GUILD_ID });
    bot.discord.dispatch('MESSAGE_DELETE', { id: '123456789012345679', channel_id: '799999999999999999', guild_id: FAKE_GUILD_ID });
    bot.discord.dispatch('MESSAGE_DELETE_BULK', { ids: ['123456789012345670', gone], channel_id: GENERAL, guild_id: FAKE_GUILD_ID });
    await waitUntil(async () => (await entryOf(GENERAL, gone)) === undefined, 'bulk delete applied');
    await bot.adapter.idle();
    assert.ok(await entryOf(GENERAL, keep));
    assert.equal(bot.events.filter((event) => event.type === 'discord_event_failed').length, failedBefore);
  });

  test('a message with only an attachment is recorded with its placeholder and answered', async () => {
    const id = bot.discord.sendMessage({
      channelId: GENERAL,
      authorId: ALICE,
      content: '',
      mentionsBot: true,
      attachments: [{ filename: 'diagram.png' }],
    });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    assert.match(posted.content, /^echo: /);
    assert.match((await entryOf(GENERAL, id))?.content ?? '', /\[attachment: diagram\.png\]/);
  });

  test('a message with no content at all (intent off) is recorded and never breaks the next turn', async () => {
    const empty = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: '' });
    await waitUntil(async () => (await entryOf(GENERAL, empty)) !== undefined, 'empty message recorded');
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'and now a question', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    assert.match(posted.content, /^echo: /);
    const request = bot.model.requests.find((recorded) => lastUserText(recorded.body).includes('and now a question'))!;
    const texts = JSON.stringify(request.body.messages);
    assert.ok(!texts.includes('"text":""'), 'no empty text block sent to the model');
  });

  test('a thread created after start: allowed under its channel; its messages stay in the thread', async () => {
    const threadId = bot.discord.nextId();
    bot.discord.addChannel({ id: threadId, name: 'new-thread', type: 11, parentId: GENERAL });
    bot.discord.dispatch('THREAD_CREATE', {
      id: threadId,
      type: 11,
      name: 'new-thread',
      guild_id: FAKE_GUILD_ID,
      parent_id: GENERAL,
      owner_id: ALICE,
      newly_created: true,
      thread_metadata: { archived: false, auto_archive_duration: 1440, archive_timestamp: new Date().toISOString(), locked: false },
    });
    const id = bot.discord.sendMessage({ channelId: threadId, authorId: ALICE, content: 'a thread question', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    assert.equal(posted.channelId, threadId);
    assert.ok(await entryOf(threadId, id));
    assert.equal(await entryOf(GENERAL, id), undefined);
    assert.ok(bot.discord.posted.every((message) => message.channelId !== FAKE_BOT_ID));
  });
});

describe('shutdown with a reply still thinking', () => {
  test('stop returns soon after the grace period, posts nothing half-done, and the bot can close', async () => {
    const bot = await startTestBot();
    try {
      bot.model.setDefault({ delayMs: 30_000, then: { text: 'far too late' } });
      const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'take your time', mentionsBot: true });
      await waitUntil(() => bot.model.inFlight > 0, 'model call in flight');
      const stopped = bot.adapter.stop(100).then(() => 'stopped' as const);
      const outcome = await Promise.race([stopped, new Promise<'hung'>((resolve) => setTimeout(resolve, 10_000, 'hung').unref())]);
      assert.equal(outcome, 'stopped');
      assert.ok(!bot.discord.posted.some((message) => message.messageReference?.message_id === id), 'no reply or apology after shutdown');
      assert.ok((await bot.app.runtime.liveContext(GENERAL)).entries.some((entry) => entry.messageId === id), 'the question stays in history');
    } finally {
      await bot.close();
    }
  });
});
