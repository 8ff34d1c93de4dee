import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { APOLOGY_REPLY } from '../src/app/index.js';
import { FAKE_BOT_ID, FAKE_GUILD_ID } from './fakes/fake-discord.js';
import {
  ALICE,
  BOB,
  BURST,
  CAROL,
  DM_ALICE,
  DM_CAROL,
  GENERAL,
  isAgentRequest,
  lastUserText,
  MOD,
  OTHER_BOT,
  QUIET,
  THREAD,
  startTestBot,
  waitUntil,
  type TestBot,
} from './discord-helpers.js';
import { systemText } from './fakes/fake-prompt-cache.js';

function fenceCount(text: string): number {
  return text.split('\n').filter((line) => line.trimStart().startsWith('```')).length;
}

describe('the bot on a fake Discord', () => {
  let bot: TestBot;

  before(async () => {
    bot = await startTestBot({
      discord: { blockedUsers: [BOB], dmUsers: [ALICE] },
      channels: { [QUIET]: { replyPolicy: 'listen' }, [BURST]: { replyPolicy: 'always' } },
    });
    // Agent turns echo the last thing said; anything else (a compaction) gets a summary.
    bot.model.setDefault((request) =>
      isAgentRequest(request.body) ? { text: `echo: ${lastUserText(request.body).slice(-60)}` } : { text: 'A short summary.' },
    );
  });

  after(async () => {
    await bot.close();
  });

  const inHistory = async (channelId: string, messageId: string) =>
    (await bot.app.runtime.liveContext(channelId)).entries.some((entry) => entry.messageId === messageId);

  test('connects, identifies once and registers the slash commands', () => {
    assert.equal(bot.discord.handshakes.filter((handshake) => handshake.op === 2).length, 1);
    const registered = bot.discord.registeredCommands.at(-1);
    assert.ok(registered);
    const names = (registered.commands as Array<{ name: string }>).map((command) => command.name).sort();
    assert.deepEqual(names, ['compact', 'context', 'memory', 'persona', 'tasks']);
    const compact = (registered.commands as Array<{ name: string; default_member_permissions?: string }>).find(
      (command) => command.name === 'compact',
    );
    assert.equal(compact?.default_member_permissions, '8192');
  });

  test('a mention gets a reply posted as a reply, with safe allowed mentions', async () => {
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'what is 2+2? @everyone', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    assert.equal(posted.channelId, GENERAL);
    assert.match(posted.content, /^echo: /);
    assert.match(posted.content, /Alice: @magpie what is 2\+2\?/);
    const parse = posted.allowedMentions?.parse ?? [];
    assert.ok(!parse.includes('everyone') && !parse.includes('roles'), `parse: ${JSON.stringify(parse)}`);
    assert.equal(posted.allowedMentions?.replied_user, true);
    assert.ok(bot.discord.typing.includes(GENERAL), 'typing indicator sent');
    // The reply is in history as the bot's message, under the id Discord gave it.
    await waitUntil(() => inHistory(GENERAL, posted.id), 'reply in history');
    const reply = (await bot.app.runtime.liveContext(GENERAL)).entries.find((entry) => entry.messageId === posted.id)!;
    assert.equal(reply.role, 'assistant');
    const request = bot.model.requests.find((recorded) => lastUserText(recorded.body).includes('what is 2+2'))!;
    assert.ok(systemText(request.body).includes('You are Magpie'), 'persona from config');
  });

  test('a 5,000-character answer arrives as valid chunks with balanced code fences', async () => {
    const code = Array.from({ length: 160 }, (_, index) => `const line${index} = ${index} * 2; // explain`).join('\n');
    const long = `Here you go:\n\`\`\`js\n${code}\n\`\`\`\nAnd some closing words about the code above.`;
    assert.ok(long.length > 5000);
    bot.model.enqueue({ text: long });
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'write me a long program', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.content.endsWith('closing words about the code above.'));
    const chunks = bot.discord.posted.filter((message) => message.channelId === GENERAL && message.content.length > 0).slice(-4);
    const start = chunks.findIndex((message) => message.messageReference?.message_id === id);
    assert.ok(start >= 0, 'the first chunk replies to the question');
    const mine = chunks.slice(start);
    assert.ok(mine.length >= 3);
    for (const chunk of mine) {
      assert.ok(chunk.content.length <= 2000, `chunk of ${chunk.content.length}`);
      assert.equal(fenceCount(chunk.content) % 2, 0, 'balanced fences');
    }
    for (const chunk of mine.slice(1)) assert.equal(chunk.messageReference, undefined);
  });

  test('listen channels never reply but remember', async () => {
    const id = bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: 'the marmalade recipe needs seville oranges', mentionsBot: true });
    await waitUntil(() => inHistory(QUIET, id), 'message recorded');
    const results = await bot.app.memory.search({ location: { channelId: QUIET, guildId: FAKE_GUILD_ID }, query: 'marmalade seville oranges' });
    assert.ok(results.some((result) => result.source_ids.includes(id)), 'found by memory search');
    await bot.adapter.idle();
    assert.equal(bot.discord.posted.filter((message) => message.channelId === QUIET).length, 0);
  });

  test('blocked users and other bots are ignored; the bot does not record its echo twice', async () => {
    const blocked = bot.discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'hello from bob', mentionsBot: true });
    const fromBot = bot.discord.sendMessage({ channelId: GENERAL, authorId: OTHER_BOT, content: 'beep', mentionsBot: true });
    const marker = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'just chatting' });
    await waitUntil(() => inHistory(GENERAL, marker), 'later message recorded');
    await bot.adapter.idle();
    assert.equal(await inHistory(GENERAL, blocked), false);
    assert.equal(await inHistory(GENERAL, fromBot), false);
    assert.ok(!bot.discord.posted.some((message) => [blocked, fromBot].includes(message.messageReference?.message_id ?? '')));
    assert.ok(bot.events.some((event) => event.type === 'message_ignored' && event.reason === 'blocked'));
    assert.ok(bot.events.some((event) => event.type === 'message_ignored' && event.reason === 'bot'));
    const own = (await bot.app.runtime.liveContext(GENERAL)).entries.filter((entry) => entry.authorId === FAKE_BOT_ID && entry.kind === 'message');
    assert.equal(new Set(own.map((entry) => entry.messageId)).size, own.length);
  });

  test('DMs: answered for listed users only', async () => {
    const listed = bot.discord.sendMessage({ channelId: DM_ALICE, authorId: ALICE, content: 'private question' });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === listed);
    assert.equal(posted.channelId, DM_ALICE);
    const unlisted = bot.discord.sendMessage({ channelId: DM_CAROL, authorId: CAROL, content: 'hello?' });
    await waitUntil(() => bot.events.some((event) => event.type === 'message_ignored' && event.reason === 'dm'), 'dm refused');
    assert.equal(await inHistory(DM_CAROL, unlisted), false);
  });

  test('a thread is its own channel', async () => {
    const id = bot.discord.sendMessage({ channelId: THREAD, authorId: ALICE, content: 'thread question', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    assert.equal(posted.channelId, THREAD);
    assert.ok(await inHistory(THREAD, id));
    assert.equal(await inHistory(GENERAL, id), false);
  });

  test('mentions, replies and attachments are normalized for the model', async () => {
    const first = bot.discord.sendMessage({ channelId: GENERAL, authorId: MOD, content: 'the build is green' });
    await waitUntil(() => inHistory(GENERAL, first), 'first recorded');
    const id = bot.discord.sendMessage({
      channelId: GENERAL,
      authorId: ALICE,
      content: `<@${MOD}> thanks, see <#${QUIET}>`,
      mentionUserIds: [MOD],
      replyToMessageId: first,
      attachments: [{ filename: 'screenshot.png' }],
    });
    await waitUntil(() => inHistory(GENERAL, id), 'reply recorded');
    const entry = (await bot.app.runtime.liveContext(GENERAL)).entries.find((candidate) => candidate.messageId === id)!;
    assert.equal(entry.authorName, 'Alice');
    // History keeps a reference; the quote is resolved when the request is built.
    assert.ok(entry.content.startsWith(`(replying to The Moderator [msg ${first}])`), entry.content);
    const request = await bot.app.runtime.buildModelRequest(GENERAL, { tools: [], maxTokens: 100 });
    assert.match(JSON.stringify(request.messages), /\(replying to The Moderator: \\"the build is green\\"\)/);
    assert.match(entry.content, /@The Moderator thanks, see #quiet/);
    assert.match(entry.content, /\[attachment: screenshot\.png\]/);
  });

  test('a burst of messages becomes one turn', async () => {
    const before = bot.model.requests.length;
    bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: 'one' });
    bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: 'two' });
    const last = bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: 'three' });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === last);
    await bot.adapter.idle();
    const turns = bot.model.requests.slice(before).filter((request) => isAgentRequest(request.body) && lastUserText(request.body).includes('three'));
    assert.equal(turns.length, 1);
    assert.match(lastUserText(turns[0]!.body), /one[\s\S]*two[\s\S]*three/);
    assert.equal(bot.discord.posted.filter((message) => message.channelId === BURST).length, 1);
  });

  test('a deleted message is gone from search; an edit updates it', async () => {
    const location = { channelId: GENERAL, guildId: FAKE_GUILD_ID };
    const secret = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'the vault combination is zanzibar' });
    const meeting = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'standup moves to tuesday' });
    await waitUntil(async () => (await inHistory(GENERAL, secret)) && (await inHistory(GENERAL, meeting)), 'recorded');
    const found = async (query: string, id: string) =>
      (await bot.app.memory.search({ location, query })).some((result) => result.source_ids.includes(id) && result.score > 0);
    await waitUntil(() => found('vault combination zanzibar', secret), 'secret searchable');

    bot.discord.deleteMessage({ channelId: GENERAL, messageId: secret });
    await waitUntil(async () => !(await found('vault combination zanzibar', secret)), 'secret gone from search');
    assert.equal(await inHistory(GENERAL, secret), false);

    bot.discord.editMessage({ messageId: meeting, content: 'standup moves to thursday' });
    await waitUntil(async () => {
      const results = await bot.app.memory.search({ location, query: 'standup thursday' });
      return results.some((result) => result.source_ids.includes(meeting) && result.content.includes('thursday'));
    }, 'edit searchable');
    const entry = (await bot.app.runtime.liveContext(GENERAL)).entries.find((candidate) => candidate.messageId === meeting)!;
    assert.equal(entry.content, 'standup moves to thursday');

    const a = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'bulk one' });
    const b = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'bulk two' });
    await waitUntil(async () => (await inHistory(GENERAL, a)) && (await inHistory(GENERAL, b)), 'bulk recorded');
    bot.discord.bulkDelete({ channelId: GENERAL, messageIds: [a, b] });
    await waitUntil(async () => !(await inHistory(GENERAL, a)) && !(await inHistory(GENERAL, b)), 'bulk deleted');
  });

  test('/context answers ephemerally; /compact and /memory forget need Manage Messages', async () => {
    const context = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'context' });
    const reply = await bot.discord.waitForInteractionReply((candidate) => candidate.token === context.token);
    assert.equal(reply.flags, 64);
    assert.match(reply.content ?? '', /Context: .*% of 200,000 tokens/);
    assert.match(reply.content ?? '', /background 80% · aggressive 85% · emergency 95%/);
    assert.match(reply.content ?? '', /Live messages: \d+/);

    const refused = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'compact' });
    const refusal = await bot.discord.waitForInteractionReply((candidate) => candidate.token === refused.token);
    assert.match(refusal.content ?? '', /Manage Messages/);
    assert.equal(refusal.flags, 64);

    const allowed = bot.discord.sendInteraction({ channelId: GENERAL, userId: MOD, name: 'compact', permissions: '8192' });
    const started = await bot.discord.waitForInteractionReply((candidate) => candidate.token === allowed.token);
    assert.match(started.content ?? '', /Compaction started on the oldest (\d+ of the )?\d+ live messages?|Compacted the oldest \d+ messages?|did not apply|already running/);
    await waitUntil(
      () => bot.events.some((event) => event.channel_id === GENERAL && (event.type === 'compaction_completed' || event.type === 'compaction_failed')),
      'compaction finished',
    );
    // The count it names is the part it compacts, not every live message.
    const named = /Compaction started on the oldest (\d+) of the/.exec(started.content ?? '');
    if (named) {
      const event = bot.events.find((candidate) => candidate.type === 'compaction_started' && candidate.channel_id === GENERAL && candidate.tier === 'manual');
      assert.equal(Number(named[1]), event?.messages);
    }

    const search = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'memory', subcommand: 'search', options: { query: 'standup' } });
    const results = await bot.discord.waitForInteractionReply((candidate) => candidate.token === search.token);
    assert.match(results.content ?? '', /standup/);
    const forget = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'memory', subcommand: 'forget', options: { id: 'm1' } });
    const forgetReply = await bot.discord.waitForInteractionReply((candidate) => candidate.token === forget.token);
    assert.match(forgetReply.content ?? '', /Manage Messages/);
  });

  test('a dropped connection resumes and the next message is still answered', async () => {
    bot.discord.dropConnection();
    // Sent while the bot is away: replayed on RESUME.
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'are you still there?', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    assert.match(posted.content, /echo/);
    assert.ok(bot.discord.handshakes.some((handshake) => handshake.op === 6), 'resumed, not re-identified');
    assert.equal(bot.discord.handshakes.filter((handshake) => handshake.op === 2).length, 1);
  });

  test('a model failure becomes a short apology, logged with the channel id', async () => {
    bot.model.enqueue({ status: 500, message: 'upstream exploded' });
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'this will fail', mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    assert.equal(posted.content, APOLOGY_REPLY);
    assert.ok(!/exploded|Error|at /.test(posted.content));
    assert.ok(bot.events.some((event) => event.type === 'agent_turn_failed' && event.channel_id === GENERAL));
  });

  test('malformed and unknown gateway events do not take the bot down', async () => {
    bot.discord.dispatch('MESSAGE_CREATE', { id: 'not-a-snowflake' });
    bot.discord.dispatch('SOMETHING_NEW', { whatever: true });
    bot.discord.dispatch('MESSAGE_DELETE', {});
    bot.discord.dispatch('MESSAGE_UPDATE', { id: '1', channel_id: GENERAL });
    // Shapes discord.js itself throws on while decoding them.
    bot.discord.dispatch('MESSAGE_DELETE_BULK', { ids: null, channel_id: GENERAL, guild_id: FAKE_GUILD_ID });
    bot.discord.dispatch('INTERACTION_CREATE', { id: '1300000000000000001', type: 2, token: 't', channel_id: GENERAL, data: null });
    bot.discord.dispatch('CHANNEL_UPDATE', { id: GENERAL, type: 0, guild_id: FAKE_GUILD_ID, permission_overwrites: 'garbage' });
    bot.discord.dispatch('MESSAGE_CREATE', { id: '1300000000000000002', channel_id: GENERAL, author: null, content: 'x', guild_id: FAKE_GUILD_ID });
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'still alive?', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === id);
    // Each dropped one is named in the log.
    const malformed = bot.events.filter((event) => event.type === 'discord_event_malformed').map((event) => event.event_type);
    for (const type of ['MESSAGE_DELETE_BULK', 'INTERACTION_CREATE', 'CHANNEL_UPDATE', 'MESSAGE_CREATE']) assert.ok(malformed.includes(type), `${type} in ${malformed.join(', ')}`);
  });

  test('the per-user rate limit answers with a friendly message (hot reloaded)', async () => {
    const current = bot.app.config.current();
    bot.app.config.replace({ ...current, discord: { ...current.discord, userTurnsPerMinute: 1 } });
    try {
      const first = bot.discord.sendMessage({ channelId: GENERAL, authorId: MOD, content: 'first question', mentionsBot: true });
      await bot.discord.waitForPost((message) => message.messageReference?.message_id === first);
      const second = bot.discord.sendMessage({ channelId: GENERAL, authorId: MOD, content: 'second question', mentionsBot: true });
      const notice = await bot.discord.waitForPost((message) => message.messageReference?.message_id === second);
      assert.match(notice.content, /faster than I can take them/);
    } finally {
      bot.app.config.replace(current);
    }
  });

  test('the daily token budget stops replies with a friendly message', async () => {
    const first = bot.discord.sendMessage({ channelId: THREAD, authorId: ALICE, content: 'spend some tokens', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === first);
    const current = bot.app.config.current();
    const tight = { ...current.defaults, dailyTokenBudget: 1 };
    bot.app.config.replace({ ...current, channels: { ...current.channels, [THREAD]: tight } });
    try {
      const second = bot.discord.sendMessage({ channelId: THREAD, authorId: ALICE, content: 'one more?', mentionsBot: true });
      const notice = await bot.discord.waitForPost((message) => message.messageReference?.message_id === second);
      assert.match(notice.content, /budget for today/);
    } finally {
      bot.app.config.replace(current);
    }
  });
});
