/**
 * Deleted means gone, also for the reply being written: a message deleted or edited while the
 * bot answers it leaves the answer as it leaves a reply already stored. The real bot against
 * the fake Discord and the fake Messages API: what Discord shows, the next request the model
 * receives, the archive's search and the stored rows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DELETED_NOTE, EDITED_NOTE } from '../src/privacy/redact.js';
import { chunkMessage } from '../src/discord/chunk-message.js';
import type { FakeReply } from './fakes/fake-anthropic.js';
import { ALICE, BOB, BURST, GENERAL, LONG, QUIET, THREAD, isAgentRequest, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';
import { systemText } from './fakes/fake-prompt-cache.js';
import { WITHHELD_SUMMARY } from '../src/channel/turn-requests.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function pieces(text: string, size: number): string[] {
  const result: string[] = [];
  for (let at = 0; at < text.length; at += size) result.push(text.slice(at, at + size));
  return result;
}

/** Every tool call of a request's messages is answered at the start of the next message, by id. */
function assertPaired(messages: Array<{ role: string; content: unknown }>): void {
  messages.forEach((message, index) => {
    if (message.role !== 'assistant' || typeof message.content === 'string') return;
    const calls = (message.content as Array<{ type: string; id?: string }>).filter((block) => block.type === 'tool_use').map((block) => block.id);
    if (calls.length === 0) return;
    const next = messages[index + 1];
    assert.equal(next?.role, 'user', 'tool calls are followed by a user message');
    const results = (next!.content as Array<{ type: string; tool_use_id?: string }>).slice(0, calls.length).map((block) => block.type === 'tool_result' && block.tool_use_id);
    assert.deepEqual(results, calls, 'each call is answered first, by its id');
  });
}

/** A reply the fake sends only once `release` is called (while it waits, the test changes the channel). */
function heldReply(reply: FakeReply): { reply: FakeReply; release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  return {
    reply: async () => {
      await held;
      return reply;
    },
    release,
  };
}

describe('a message deleted or edited while the bot answers it leaves the answer', () => {
  let bot: TestBot;
  let turns = 0;

  before(async () => {
    bot = await startTestBot({ defaults: { streamReplies: false }, channels: { [LONG]: { streamReplies: true } } });
    bot.model.setDefault({ text: 'Noted.' });
  });
  after(async () => bot.close());

  async function turnDone(channelId: string): Promise<void> {
    turns += 1;
    const count = bot.events.filter((event) => event.channel_id === channelId && (event.type === 'agent_turn_completed' || event.type === 'agent_turn_failed')).length + 1;
    await waitUntil(
      () => bot.events.filter((event) => event.channel_id === channelId && (event.type === 'agent_turn_completed' || event.type === 'agent_turn_failed')).length >= count,
      'the agent turn to end',
      30_000,
    );
    await bot.adapter.idle();
  }

  /** The next agent request of the channel carries no copy of `gone`. */
  async function nextRequestLacks(channelId: string, gone: string): Promise<string> {
    const since = bot.model.requests.length;
    const done = turnDone(channelId);
    bot.discord.sendMessage({ channelId, authorId: BOB, content: `anything else? (${turns})`, mentionsBot: true });
    await done;
    const request = bot.model.requests.slice(since).find((candidate) => isAgentRequest(candidate.body));
    assert.ok(request, 'the next turn asked the model');
    const body = JSON.stringify(request.body);
    assert.ok(!body.includes(gone), 'the next request holds no copy of the old text');
    return body;
  }

  /** Neither the archive's search nor any stored row finds `word`. */
  async function storeLacks(channelId: string, word: string): Promise<void> {
    const hits = await bot.app.memory.search({ location: { channelId }, query: word, limit: 20 });
    assert.deepEqual(
      hits.filter((hit) => hit.content.includes(word)).map((hit) => hit.content),
      [],
      'search finds no copy',
    );
    const rows = (await bot.app.db
      .prepare(`SELECT content FROM history_entries WHERE content LIKE ? UNION ALL SELECT content FROM memory_items WHERE content LIKE ?`)
      .all(`%${word}%`, `%${word}%`)) as Array<{ content: string }>;
    assert.deepEqual(rows, [], 'no stored row holds it');
  }

  test('a delete during the model call: the reply is posted and recorded without the quote', async () => {
    const secret = 'the alarm code for the shed is 7731-WOMBAT-ECHO';
    bot.model.enqueue({ delayMs: 1_000, then: { text: `You said: ${secret}. Noted.` } });
    const done = turnDone(QUIET);
    const id = bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: secret, mentionsBot: true });
    await waitUntil(() => bot.model.requests.some((request) => JSON.stringify(request.body).includes('WOMBAT')), 'the model to be asked');
    bot.discord.deleteMessage({ channelId: QUIET, messageId: id });
    await done;

    const replies = bot.discord.visibleReplies(QUIET);
    assert.deepEqual(replies.map((reply) => reply.content), [`You said: ${DELETED_NOTE}. Noted.`]);
    const stored = (await bot.app.runtime.liveContext(QUIET)).entries.find((entry) => entry.messageId === replies[0]!.id);
    assert.equal(stored?.content, `You said: ${DELETED_NOTE}. Noted.`, 'history holds the reply without the quote');
    await storeLacks(QUIET, 'WOMBAT');
    await nextRequestLacks(QUIET, 'WOMBAT');
  });

  test('a delete right after the reply is posted (before or after it is recorded): the posted reply is edited', async () => {
    const secret = 'the boat key hangs behind the blue door, hook 42-KESTREL';
    bot.model.enqueue({ text: `Good to know: ${secret}.` });
    const done = turnDone(BURST);
    const id = bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: secret, mentionsBot: true });
    const posted = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    bot.discord.deleteMessage({ channelId: BURST, messageId: id });
    await done;
    await waitUntil(() => bot.discord.contentOf(posted.id) === `Good to know: ${DELETED_NOTE}.`, 'the posted reply to be edited', 10_000);
    await bot.adapter.idle();
    assert.equal(bot.discord.contentOf(posted.id), `Good to know: ${DELETED_NOTE}.`);
    await storeLacks(BURST, 'KESTREL');
    await nextRequestLacks(BURST, 'KESTREL');
  });

  test('a delete between the parts of a streamed reply: every part, those posted after it too, loses the quote', async () => {
    const secret = 'the vault combination is 90-17-LYNX-33, keep it safe';
    const filler = Array.from({ length: 60 }, (_, index) => `Line ${index + 1} of the long answer goes on for a while here.`).join('\n');
    const answer = `You told me: ${secret}.\n${filler}\nOnce more, as you said: ${secret}.`;
    assert.ok(chunkMessage(answer).length >= 2, 'the answer needs several parts');
    bot.model.enqueue({ text: answer, chunks: pieces(answer, 150), chunkDelayMs: 60 });
    const done = turnDone(LONG);
    const id = bot.discord.sendMessage({ channelId: LONG, authorId: ALICE, content: secret, mentionsBot: true });
    const first = await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    assert.ok(first.content.includes('LYNX'), 'precondition: the first part quoted the message before the delete');
    await sleep(200);
    bot.discord.deleteMessage({ channelId: LONG, messageId: id });
    await done;
    // The stream's last edits land at most one a second per message.
    await waitUntil(() => !bot.discord.visibleReplies(LONG).some((reply) => reply.content.includes('LYNX')), 'every part to lose the quote', 15_000);
    await bot.adapter.idle();

    const parts = bot.discord.visibleReplies(LONG).map((reply) => reply.content);
    const expected = answer.replaceAll(secret, DELETED_NOTE);
    assert.deepEqual(parts, chunkMessage(expected), 'Discord shows the answer without the quote, chunked as a finished reply');
    assert.ok(bot.discord.posted.filter((message) => message.channelId === LONG).length >= 2, 'a later part was posted after the delete');
    const reply = (await bot.app.runtime.liveContext(LONG)).entries.find((entry) => entry.messageId === first.id);
    assert.equal(reply?.content, expected, 'history holds the reply without the quote');
    await storeLacks(LONG, 'LYNX');
    await nextRequestLacks(LONG, 'LYNX');
  });

  test('an edit during the model call: the reply loses the earlier text, the new text is what the next request reads', async () => {
    const old = 'my PIN for the locker is 4455-OLDPIN-ZZ please';
    bot.model.enqueue({ delayMs: 1_000, then: { text: `Got it: ${old}` } });
    const done = turnDone(GENERAL);
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: old, mentionsBot: true });
    await waitUntil(() => bot.model.requests.some((request) => JSON.stringify(request.body).includes('OLDPIN')), 'the model to be asked');
    bot.discord.editMessage({ messageId: id, content: 'never mind, the locker is NEWTEXT-open' });
    await done;

    const replies = bot.discord.visibleReplies(GENERAL);
    assert.deepEqual(replies.map((reply) => reply.content), [`Got it: ${EDITED_NOTE}`]);
    const stored = (await bot.app.runtime.liveContext(GENERAL)).entries.find((entry) => entry.messageId === replies[0]!.id);
    assert.equal(stored?.content, `Got it: ${EDITED_NOTE}`);
    await storeLacks(GENERAL, 'OLDPIN');
    const hits = await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'NEWTEXT', limit: 5 });
    assert.ok(hits.some((hit) => hit.content.includes('NEWTEXT-open')), 'search finds the new text');
    const body = await nextRequestLacks(GENERAL, 'OLDPIN');
    assert.ok(body.includes('NEWTEXT-open'), 'the next request reads the new text');
  });

  test('an edit between the parts of a streamed reply: the parts follow it', async () => {
    const old = 'the meeting moved to room ORCHID-7 on the third floor';
    const filler = Array.from({ length: 55 }, (_, index) => `Point ${index + 1}: another sentence of the answer, long enough to matter.`).join('\n');
    const answer = `Noted that ${old}.\n${filler}\nAgain: ${old}.`;
    bot.model.enqueue({ text: answer, chunks: pieces(answer, 150), chunkDelayMs: 60 });
    const done = turnDone(LONG);
    const id = bot.discord.sendMessage({ channelId: LONG, authorId: ALICE, content: old, mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    await sleep(200);
    bot.discord.editMessage({ messageId: id, content: 'scratch that, same room as always' });
    await done;
    await waitUntil(() => !bot.discord.visibleReplies(LONG).some((reply) => reply.content.includes('ORCHID')), 'every part to lose the old text', 15_000);
    await bot.adapter.idle();
    const parts = bot.discord.visibleReplies(LONG).map((reply) => reply.content).slice(-chunkMessage(answer.replaceAll(old, EDITED_NOTE)).length);
    assert.deepEqual(parts, chunkMessage(answer.replaceAll(old, EDITED_NOTE)));
    await storeLacks(LONG, 'ORCHID');
    await nextRequestLacks(LONG, 'ORCHID');
  });

  /** The agent requests the model received since `since`. */
  function agentRequests(since: number): Array<{ body: any }> {
    return bot.model.requests.slice(since).filter((request) => isAgentRequest(request.body));
  }

  /** Resolves once `count` more events of `type` were logged for the channel. */
  async function eventsSeen(channelId: string, type: string, before: number): Promise<void> {
    await waitUntil(() => bot.events.filter((event) => event.channel_id === channelId && event.type === type).length > before, `${type} in the channel`, 10_000);
  }

  function eventCount(channelId: string, type: string): number {
    return bot.events.filter((event) => event.channel_id === channelId && event.type === type).length;
  }

  test('a delete while a tool call is handled: the next request of the same turn carries none of it', async () => {
    const secret = 'the gate code for the orchard is 5512-PLOVER-NINE';
    const first = heldReply({ text: `You said: ${secret}. Let me look that up.`, toolUse: [{ name: 'memory_search', input: { query: secret } }] });
    bot.model.enqueue(first.reply, { text: 'Looked it up.' });
    const since = bot.model.requests.length;
    const done = turnDone(BURST);
    const id = bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: secret, mentionsBot: true });
    await waitUntil(() => agentRequests(since).some((request) => JSON.stringify(request.body).includes('PLOVER')), 'the model to be asked');
    const deletes = eventCount(BURST, 'deletion_propagated');
    bot.discord.deleteMessage({ channelId: BURST, messageId: id });
    await eventsSeen(BURST, 'deletion_propagated', deletes);
    first.release();
    await done;

    const requests = agentRequests(since);
    assert.equal(requests.length, 2, 'the turn asked the model twice');
    const followUp = JSON.stringify(requests[1]!.body);
    assert.ok(!followUp.includes('PLOVER'), 'the follow-up request holds no copy of the deleted message');
    assert.ok(followUp.includes(DELETED_NOTE), 'the message and its quotes are marked deleted');
    assertPaired(requests[1]!.body.messages);
    await storeLacks(BURST, 'PLOVER');
  });

  test('a delete of an earlier message a search result quoted: the next request of the turn carries none of it', async () => {
    const secret = 'the spare key sits under the third flowerpot, tag 8840-HERON-LIMA';
    bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: secret });
    await waitUntil(
      async () => (await bot.app.memory.search({ location: { channelId: QUIET }, query: 'HERON', limit: 5 })).some((hit) => hit.content.includes('HERON')),
      'the message to be searchable',
      10_000,
    );
    const id = (await bot.app.runtime.liveContext(QUIET)).entries.find((entry) => entry.content.includes('HERON'))!.messageId;
    const second = heldReply({ text: `Found it: ${secret}. One more look.`, toolUse: [{ name: 'memory_search', input: { query: secret } }] });
    bot.model.enqueue({ toolUse: [{ name: 'memory_search', input: { query: 'spare key tag' } }] }, second.reply, { text: 'That is all I know.' });
    const since = bot.model.requests.length;
    const done = turnDone(QUIET);
    bot.discord.sendMessage({ channelId: QUIET, authorId: BOB, content: 'where is the spare key?', mentionsBot: true, replyToMessageId: id });
    await waitUntil(() => agentRequests(since).length >= 2, 'the request after the search');
    assert.ok(JSON.stringify(agentRequests(since)[0]!.body).includes('(replying to Alice: \\"the spare key sits'), 'precondition: the question quotes the message it replies to');
    const results = (agentRequests(since)[1]!.body.messages as Array<{ content: unknown }>).at(-1)!.content;
    assert.ok(JSON.stringify(results).includes('HERON'), 'precondition: the search result quoted the message');
    const deletes = eventCount(QUIET, 'deletion_propagated');
    bot.discord.deleteMessage({ channelId: QUIET, messageId: id });
    await eventsSeen(QUIET, 'deletion_propagated', deletes);
    second.release();
    await done;

    const requests = agentRequests(since);
    assert.equal(requests.length, 3, 'the turn asked the model three times');
    const followUp = JSON.stringify(requests[2]!.body);
    assert.ok(!followUp.includes('HERON'), 'no copy in the message, the search result, the tool call or the words before it');
    assert.ok(followUp.includes(DELETED_NOTE));
    assert.ok(followUp.includes('where is the spare key?'), 'the question itself stays');
    assert.ok(followUp.includes('(replying to Alice: a message that is no longer available)'), 'the reply no longer quotes it');
    assertPaired(requests[2]!.body.messages);
    await storeLacks(QUIET, 'HERON');
    await nextRequestLacks(QUIET, 'HERON');
  });

  test('an edit while a tool call is handled: the next request of the same turn reads the new text', async () => {
    const old = 'please book the table for six at LANTERN-HALL tonight';
    const first = heldReply({ text: `Booking: ${old}.`, toolUse: [{ name: 'memory_search', input: { query: old } }] });
    bot.model.enqueue(first.reply, { text: 'Booked.' });
    const since = bot.model.requests.length;
    const done = turnDone(GENERAL);
    const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: old, mentionsBot: true });
    await waitUntil(() => agentRequests(since).some((request) => JSON.stringify(request.body).includes('LANTERN')), 'the model to be asked');
    const edits = eventCount(GENERAL, 'message_edited');
    bot.discord.editMessage({ messageId: id, content: 'actually make it the BRASS-KETTLE at eight' });
    await eventsSeen(GENERAL, 'message_edited', edits);
    first.release();
    await done;

    const requests = agentRequests(since);
    assert.equal(requests.length, 2, 'the turn asked the model twice');
    const followUp = JSON.stringify(requests[1]!.body);
    assert.ok(!followUp.includes('LANTERN'), 'the follow-up request holds no copy of the earlier text');
    assert.ok(followUp.includes('actually make it the BRASS-KETTLE at eight'), 'it reads the new text');
    assert.ok(followUp.includes(EDITED_NOTE), 'the quotes of the earlier text are marked');
    assertPaired(requests[1]!.body.messages);
  });
  test('a delete of a message a summary in the system prompt covers: the next request of the same turn shows the summary without it', async () => {
    const secret = 'the vault word is QUARTZ-OTTER, keep it to yourself';
    // The summarizer (and the rewrite after the delete) writes from what it is sent, quoting the secret if it reads it.
    let releaseSearch!: () => void;
    const searchHeld = new Promise<void>((resolve) => {
      releaseSearch = resolve;
    });
    bot.model.setDefault(async (request) => {
      if (!isAgentRequest(request.body)) {
        return { text: JSON.stringify(request.body).includes('QUARTZ') ? 'Summary: Alice said the vault word is QUARTZ-OTTER.' : 'Summary: Alice and Bob talked about the weekend.' };
      }
      const lastUser = (request.body.messages as Array<{ role: string; content: unknown }>).filter((message) => message.role === 'user').at(-1);
      if (JSON.stringify(lastUser?.content ?? '').includes('tool_result')) return { text: 'Done looking.' };
      await searchHeld;
      return { text: 'Let me check the archive.', toolUse: [{ name: 'memory_search', input: { query: 'vault word' } }] };
    });
    try {
      const id = bot.discord.sendMessage({ channelId: THREAD, authorId: ALICE, content: secret });
      for (let index = 0; index < 5; index += 1) bot.discord.sendMessage({ channelId: THREAD, authorId: BOB, content: `weekend plan ${index}: a walk by the river` });
      await waitUntil(async () => (await bot.app.runtime.liveContext(THREAD)).entries.length === 6, 'the messages stored');
      const outcome = await bot.app.runtime.compactNow(THREAD);
      assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
      assert.ok((await bot.app.runtime.liveContext(THREAD)).summaries.some((summary) => summary.content.includes('QUARTZ')), 'precondition: a summary quotes the message');

      const since = bot.model.requests.length;
      const done = turnDone(THREAD);
      bot.discord.sendMessage({ channelId: THREAD, authorId: BOB, content: 'what did we plan?', mentionsBot: true });
      await waitUntil(() => agentRequests(since).length >= 1, 'the model to be asked');
      assert.ok(systemText(agentRequests(since)[0]!.body).includes('QUARTZ'), 'precondition: the first request carries the summary');
      const deletes = eventCount(THREAD, 'deletion_propagated');
      bot.discord.deleteMessage({ channelId: THREAD, messageId: id });
      await eventsSeen(THREAD, 'deletion_propagated', deletes);
      releaseSearch();
      await done;

      const requests = agentRequests(since);
      assert.equal(requests.length, 2, 'the turn asked the model twice');
      const system = systemText(requests[1]!.body);
      assert.ok(!JSON.stringify(requests[1]!.body).includes('QUARTZ'), 'the follow-up request holds no copy of the deleted message, in its system prompt too');
      assert.ok(!system.includes(WITHHELD_SUMMARY), 'the propagation had run: the summary is shown as it left it');
      assert.match(system, /marker of messages|Alice and Bob talked about the weekend/, 'the summary stands as a marker or its rewrite');
      await nextRequestLacks(THREAD, 'QUARTZ');
    } finally {
      releaseSearch();
      bot.model.setDefault({ text: 'Noted.' });
    }
  });
});
