/**
 * Deleted means gone, end to end: the real discord.js client against the fake Discord, the real
 * SDK against the fake Messages API. After a delete (or an edit), the next request the model
 * receives holds no copy of the old words: not in tool results left by a memory_search turn,
 * not in a summary that covered the message, not in a memory drawn from it. The history file
 * holds none either, so a restart brings nothing back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RecordedRequest, FakeReply } from './fakes/fake-anthropic.js';
import { ALICE, BOB, GENERAL, LONG, QUIET, BURST, isAgentRequest, lastUserText, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';
import { systemText } from './fakes/fake-prompt-cache.js';

type Body = RecordedRequest['body'];

/** Every tool_result answers a tool_use of the message before, and every tool_use is answered. */
function assertPairsValid(body: Body): void {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  messages.forEach((message, index) => {
    const blocks = Array.isArray(message.content) ? (message.content as Array<{ type: string; id?: string; tool_use_id?: string }>) : [];
    if (message.role === 'user') {
      const previous = messages[index - 1];
      const asked = new Set(
        (Array.isArray(previous?.content) ? (previous!.content as Array<{ type: string; id?: string }>) : [])
          .filter((block) => block.type === 'tool_use')
          .map((block) => block.id),
      );
      for (const block of blocks) if (block.type === 'tool_result') assert.ok(asked.has(block.tool_use_id), `tool_result ${block.tool_use_id} answers a call`);
    } else {
      const next = messages[index + 1];
      const answered = new Set(
        (Array.isArray(next?.content) ? (next!.content as Array<{ type: string; tool_use_id?: string }>) : [])
          .filter((block) => block.type === 'tool_result')
          .map((block) => block.tool_use_id),
      );
      for (const block of blocks) if (block.type === 'tool_use') assert.ok(answered.has(block.id), `tool_use ${block.id} is answered`);
    }
  });
}

function hasToolResult(request: RecordedRequest): boolean {
  const last = request.body.messages.at(-1);
  return Array.isArray(last?.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
}

describe('a deleted or edited message leaves no copy in the next model request', () => {
  let bot: TestBot;
  /** Per channel: what the agent answers (a tool call first, when scripted). */
  const agentScript = new Map<string, (request: RecordedRequest) => FakeReply>();
  let worker: (request: RecordedRequest) => FakeReply = () => ({ status: 500 });

  before(async () => {
    bot = await startTestBot();
    bot.model.setDefault((request) => {
      if (!isAgentRequest(request.body)) return worker(request);
      const script = [...agentScript.entries()].find(([marker]) => lastUserText(request.body).includes(marker) || JSON.stringify(request.body.messages).includes(marker));
      if (hasToolResult(request) || !script) return { text: 'Noted.' };
      return script[1](request);
    });
  });
  after(async () => bot.close());

  const inHistory = async (channelId: string, id: string) => (await bot.app.runtime.liveContext(channelId)).entries.some((entry) => entry.messageId === id);
  const propagated = (channelId: string, since: number) =>
    bot.events.slice(since).some((event) => event.type === 'deletion_propagated' && event.channel_id === channelId);

  /** Everything SQLite holds that could reach the model, with the text searched for. */
  async function storedCopies(text: string): Promise<string[]> {
    const like = `%${text}%`;
    const rows = [
      ...(await bot.app.db.prepare(`SELECT 'history' AS place, content FROM history_entries WHERE content LIKE ?`).all(like)),
      ...(await bot.app.db.prepare(`SELECT 'summary' AS place, content FROM history_summaries WHERE content LIKE ?`).all(like)),
      ...(await bot.app.db.prepare(`SELECT 'memory' AS place, content FROM memory_items WHERE content LIKE ?`).all(like)),
    ] as Array<{ place: string; content: string }>;
    return rows.map((row) => `${row.place}: ${row.content.slice(0, 80)}`);
  }

  async function askBot(channelId: string, content: string): Promise<RecordedRequest> {
    const before = bot.model.requests.length;
    const id = bot.discord.sendMessage({ channelId, authorId: BOB, content, mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    await bot.adapter.idle();
    const requests = bot.model.requests.slice(before).filter((request) => isAgentRequest(request.body));
    assert.ok(requests.length > 0, 'the bot asked the model');
    return requests[0]!;
  }

  test('after a memory_search turn, the quoted message is gone from the tool result; the pair stays valid', async () => {
    const secret = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'the vault combination is zanzibar-7741' });
    await waitUntil(() => inHistory(GENERAL, secret), 'secret recorded');
    await waitUntil(
      async () => (await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'vault combination zanzibar' })).length > 0,
      'secret searchable',
    );
    agentScript.set('which vault', () => ({ toolUse: [{ name: 'memory_search', input: { query: 'vault combination' } }] }));
    await askBot(GENERAL, 'which vault combination did Alice mention?');
    const toolResults = (await bot.app.runtime.liveContext(GENERAL)).entries.filter((entry) => entry.kind === 'tool_result');
    assert.ok(toolResults.some((entry) => entry.content.includes('zanzibar-7741')), 'precondition: the search result quotes the message');

    const since = bot.events.length;
    bot.discord.deleteMessage({ channelId: GENERAL, messageId: secret });
    await waitUntil(() => propagated(GENERAL, since), 'delete propagated');

    const next = await askBot(GENERAL, 'thanks, anything else?');
    const sent = JSON.stringify(next.body);
    assert.ok(!sent.includes('zanzibar'), 'no copy reaches the model');
    assert.ok(sent.includes('[deleted message]'), 'the tool result says a message was deleted');
    assertPairsValid(next.body);
    assert.deepEqual(await storedCopies('zanzibar'), [], 'no copy is stored either (a restart brings none back)');
  });

  test('after a compaction, the summary that covered the message is not sent, then rewritten without it; its memory is gone', async () => {
    const locker = bot.discord.sendMessage({ channelId: LONG, authorId: ALICE, content: 'my locker code is quokka-5521' });
    const lunch = bot.discord.sendMessage({ channelId: LONG, authorId: BOB, content: 'I always have lunch at noon sharp' });
    for (const text of ['the printer on floor two is jammed again', 'the release notes are drafted', 'we meet on Thursday', 'the wiki moved']) {
      bot.discord.sendMessage({ channelId: LONG, authorId: BOB, content: text });
    }
    await waitUntil(async () => (await bot.app.runtime.liveContext(LONG)).entries.length >= 6, 'messages recorded');

    const rewriteRequests: RecordedRequest[] = [];
    let releaseRewrite!: () => void;
    const rewriteHeld = new Promise<void>((resolve) => {
      releaseRewrite = resolve;
    });
    worker = (request) => {
      if (!JSON.stringify(request.body.messages).includes('quokka')) {
        rewriteRequests.push(request);
        // Held, so the test can see what is sent while the rewrite is running.
        return async () => {
          await rewriteHeld;
          return { text: 'Bob has lunch at noon; the printer is jammed; release notes drafted.' };
        };
      }
      if (hasToolResult(request)) return { text: 'Alice shared her locker code quokka-5521. Bob has lunch at noon.' };
      return {
        toolUse: [
          { name: 'memory_save', input: { content: 'Alice locker code is quokka-5521', memory_type: 'fact', source_ids: [locker] } },
          { name: 'memory_save', input: { content: 'Bob has lunch at noon', memory_type: 'preference', source_ids: [`msg ${lunch}`] } },
        ],
      };
    };
    const outcome = await bot.app.runtime.compactNow(LONG);
    assert.equal((outcome as { status: string }).status, 'completed', JSON.stringify(outcome));
    assert.ok((await bot.app.runtime.liveContext(LONG)).summaries.some((summary) => summary.content.includes('quokka')), 'precondition: summarized');
    const memories = await bot.app.memory.list({ location: { channelId: LONG }, kind: 'memory' });
    assert.deepEqual(memories.find((memory) => memory.content.includes('quokka'))?.sourceIds, [locker], 'the worker named its source');
    assert.deepEqual(memories.find((memory) => memory.content.includes('lunch'))?.sourceIds, [lunch], 'a "msg " prefix is understood');

    const since = bot.events.length;
    bot.discord.deleteMessage({ channelId: LONG, messageId: locker });
    await waitUntil(() => propagated(LONG, since), 'delete propagated');
    // Until the rewrite lands, the range stands as a truncation marker.
    const meanwhile = await bot.app.runtime.buildModelRequest(LONG, { tools: [], maxTokens: 100 });
    assert.ok(!meanwhile.system.includes('quokka'), 'the stale summary is not sent');
    assert.match(meanwhile.system, /\[marker of messages \d+-\d+\]\n\d+ older messages were truncated/);
    assert.deepEqual(await storedCopies('quokka'), [], 'the stale summary, the memory and the message are gone from the file');

    releaseRewrite();
    await waitUntil(() => bot.events.slice(since).some((event) => event.type === 'summary_rewritten' && event.channel_id === LONG), 'rewritten');
    assert.equal(rewriteRequests.length, 1);
    assert.ok(!JSON.stringify(rewriteRequests[0]!.body).includes('quokka'), 'the rewrite worker never sees the deleted message');

    const next = await askBot(LONG, 'what do you remember about lunch?');
    const sent = JSON.stringify(next.body);
    assert.ok(!sent.includes('quokka'), 'no copy reaches the model');
    assert.match(systemText(next.body), /Bob has lunch at noon; the printer is jammed/);
    const left = (await bot.app.memory.list({ location: { channelId: LONG }, kind: 'memory' })).map((memory) => memory.content);
    assert.deepEqual(left, ['Bob has lunch at noon'], 'the memory drawn only from the deleted message is gone, the other stays');
  });

  for (const action of ['delete', 'edit'] as const) {
    test(`after a memory_save turn, a ${action} removes the memory and the saved words from the tool call`, async () => {
      const channelId = action === 'delete' ? BURST : QUIET;
      const code = action === 'delete' ? 'heron-2718' : 'pelican-3141';
      const marker = `bike lock ${action}`;
      agentScript.set(marker, () => ({
        toolUse: [{ name: 'memory_save', input: { content: `Alice's bike lock code is ${code}`, memory_type: 'fact' } }],
      }));
      const before = bot.model.requests.length;
      const id = bot.discord.sendMessage({ channelId, authorId: ALICE, content: `please remember my ${marker} code is ${code}`, mentionsBot: true });
      await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
      await bot.adapter.idle();
      assert.ok(bot.model.requests.length > before);
      const saved = await bot.app.memory.list({ location: { channelId }, kind: 'memory' });
      assert.deepEqual(saved.find((memory) => memory.content.includes(code))?.sourceIds, [id], 'the turn recorded the message it answered');

      const since = bot.events.length;
      if (action === 'delete') {
        bot.discord.deleteMessage({ channelId, messageId: id });
        await waitUntil(() => propagated(channelId, since), 'delete propagated');
      } else {
        bot.discord.editMessage({ messageId: id, content: 'never mind, forget the bike' });
        await waitUntil(() => bot.events.slice(since).some((event) => event.type === 'message_edited' && event.channel_id === channelId), 'edit applied');
      }
      const next = await askBot(channelId, 'ok');
      const sent = JSON.stringify(next.body);
      assert.ok(!sent.includes(code), `no copy of ${code} reaches the model`);
      assertPairsValid(next.body);
      if (action === 'edit') assert.ok(sent.includes('never mind, forget the bike'), 'the new text is there');
      assert.deepEqual(await storedCopies(code), []);
      assert.ok(!(await bot.app.memory.list({ location: { channelId }, kind: 'memory' })).some((memory) => memory.content.includes(code)));
    });
  }

  test('a reply quotes the message it answers at request time: after a delete, the quote is gone', async () => {
    const original = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'the staging password is marmot-1618' });
    await waitUntil(() => inHistory(GENERAL, original), 'original recorded');
    const reply = bot.discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'got it', replyToMessageId: original });
    await waitUntil(() => inHistory(GENERAL, reply), 'reply recorded');
    const stored = (await bot.app.runtime.liveContext(GENERAL)).entries.find((entry) => entry.messageId === reply)!;
    assert.ok(!stored.content.includes('marmot'), 'history keeps a reference, not a copy');
    assert.ok(JSON.stringify(await bot.app.runtime.buildModelRequest(GENERAL, { tools: [], maxTokens: 100 })).includes('marmot-1618'), 'resolved when sent');

    const since = bot.events.length;
    bot.discord.deleteMessage({ channelId: GENERAL, messageId: original });
    await waitUntil(() => propagated(GENERAL, since), 'delete propagated');
    const request = JSON.stringify(await bot.app.runtime.buildModelRequest(GENERAL, { tools: [], maxTokens: 100 }));
    assert.ok(!request.includes('marmot'));
    assert.match(request, /replying to Alice: a message that is no longer available/);
  });
});
