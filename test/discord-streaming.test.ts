import { test } from 'node:test';
import assert from 'node:assert/strict';
import { APOLOGY_REPLY, STREAM_BROKEN_NOTE } from '../src/app/channel-responder.js';
import { chunkMessage } from '../src/discord/chunk-message.js';
import { DEFAULT_EDIT_INTERVAL_MS } from '../src/discord/streamed-reply.js';
import { ALICE, BURST, GENERAL, LONG, QUIET, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';
import { ChannelResponder, type ResponderRuntime } from '../src/app/channel-responder.js';
import { GatedModel, openHarness, userMessage } from './compaction-support.js';

/** A long answer with a code block that straddles the 2,000-character limit. */
function longAnswer(): string {
  const prose = Array.from({ length: 24 }, (_, index) => `Step ${index + 1}: keep the migration idempotent and log what changed.`).join('\n');
  const code = Array.from({ length: 40 }, (_, index) => `  const value${index} = await load(${index}); // keeps going`).join('\n');
  return `${prose}\n\n\`\`\`ts\nasync function migrate() {\n${code}\n}\n\`\`\`\n\n${prose}\nThat is all.`;
}

function pieces(text: string, size: number): string[] {
  const result: string[] = [];
  for (let at = 0; at < text.length; at += size) result.push(text.slice(at, at + size));
  return result;
}

async function turnDone(bot: TestBot, channelId: string, count = 1): Promise<void> {
  await waitUntil(
    () => bot.events.filter((event) => (event.type === 'agent_turn_completed' || event.type === 'agent_turn_failed') && event.channel_id === channelId).length >= count,
    'the agent turn to end',
    30_000,
  );
  await bot.adapter.idle();
}

/** Every write (post or edit) per message, with the time the fake received it. */
function writesPerMessage(bot: TestBot, channelId: string): Map<string, number[]> {
  const writes = new Map<string, number[]>();
  for (const post of bot.discord.posted.filter((message) => message.channelId === channelId)) writes.set(post.id, [post.at!]);
  for (const edit of bot.discord.edits.filter((candidate) => candidate.channelId === channelId && candidate.kind === 'edit')) {
    writes.get(edit.messageId)?.push(edit.at);
  }
  return writes;
}

test('a long streamed answer arrives as a post and edits that end in exactly the final chunking, no message edited more than once a second', async () => {
  const bot = await startTestBot();
  try {
    const answer = longAnswer();
    assert.ok(answer.length > 4000);
    bot.model.enqueue({ text: answer, chunks: pieces(answer, 120), chunkDelayMs: 60 });
    bot.discord.sendMessage({ channelId: LONG, authorId: ALICE, content: 'how do I write the migration?', mentionsBot: true });
    await turnDone(bot, LONG);

    const request = bot.model.requests[0]!.body;
    assert.equal(request.stream, true, 'the SDK asked for a stream');
    const expected = chunkMessage(answer);
    assert.ok(expected.length >= 3);
    assert.deepEqual(
      bot.discord.visibleReplies(LONG).map((reply) => reply.content),
      expected,
    );
    for (const part of expected) {
      assert.ok(part.length <= 2000);
      assert.equal((part.split('```').length - 1) % 2, 0, 'fences balanced in every part');
    }
    // It really streamed: the first post came before the answer was complete and was edited.
    const posts = bot.discord.posted.filter((message) => message.channelId === LONG);
    assert.equal(posts.length, expected.length, 'each part posted once');
    assert.notEqual(posts[0]!.content, expected[0]);
    assert.ok(bot.discord.edits.some((edit) => edit.messageId === posts[0]!.id));
    assert.equal(posts[0]!.messageReference?.message_id !== undefined, true, 'the first part replies to the question');
    for (const [id, times] of writesPerMessage(bot, LONG)) {
      for (let index = 1; index < times.length; index += 1) {
        assert.ok(times[index]! - times[index - 1]! >= DEFAULT_EDIT_INTERVAL_MS, `message ${id} written twice within ${times[index]! - times[index - 1]!} ms`);
      }
    }
    // History records the final text once, under the first part's id.
    const replies = (await bot.app.runtime.liveContext(LONG)).entries.filter((entry) => entry.role === 'assistant');
    assert.equal(replies.length, 1);
    assert.equal(replies[0]!.content, answer);
    assert.equal(replies[0]!.messageId, posts[0]!.id);
  } finally {
    await bot.close();
  }
});

test('a stream that breaks midway leaves a clean message ending in a note, and no apology posted after it', async () => {
  const bot = await startTestBot();
  try {
    bot.model.enqueue({ text: 'The first thing to check is the ```sh\nls -la\nand then the config', chunks: ['The first thing to check is the ', '```sh\nls -la\n', 'and then the config'], chunkDelayMs: 40, breakAfter: 2 });
    bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: 'what should I check?', mentionsBot: true });
    await turnDone(bot, QUIET);
    const visible = bot.discord.visibleReplies(QUIET).map((reply) => reply.content);
    assert.equal(visible.length, 1);
    assert.ok(visible[0]!.startsWith('The first thing to check is the'));
    assert.ok(visible[0]!.endsWith(STREAM_BROKEN_NOTE), visible[0]);
    assert.equal((visible[0]!.split('```').length - 1) % 2, 0, 'the open code block is closed before the note');
    assert.ok(!bot.discord.posted.some((message) => message.content === APOLOGY_REPLY));
    assert.equal(bot.discord.posted.filter((message) => message.channelId === QUIET).length, 1, 'nothing posted twice');
    assert.ok(bot.events.some((event) => event.type === 'agent_turn_failed' && event.channel_id === QUIET));
    // The broken answer is not recorded as if it had been given.
    assert.ok(!(await bot.app.runtime.liveContext(QUIET)).entries.some((entry) => entry.role === 'assistant'));

    // An error event in the middle of the stream (the API overloaded) ends the same way.
    bot.model.enqueue({ text: 'Partly written answer that never', chunks: ['Partly written ', 'answer that never'], chunkDelayMs: 20, errorAfter: 1 });
    bot.discord.sendMessage({ channelId: BURST, authorId: ALICE, content: 'and now?', mentionsBot: true });
    await turnDone(bot, BURST);
    const second = bot.discord.visibleReplies(BURST).map((reply) => reply.content);
    assert.deepEqual(second, [`Partly written\n\n${STREAM_BROKEN_NOTE}`]);
  } finally {
    await bot.close();
  }
});

test('a stream that fails before any text falls back to the usual apology', async () => {
  const bot = await startTestBot();
  try {
    bot.model.enqueue({ text: 'never shown', breakAfter: 0 });
    bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: 'hello?', mentionsBot: true });
    await turnDone(bot, QUIET);
    assert.deepEqual(bot.discord.visibleReplies(QUIET).map((reply) => reply.content), [APOLOGY_REPLY]);
  } finally {
    await bot.close();
  }
});

test('words written before a tool call stay on screen, typing comes back while the tool runs, and the answer follows', async () => {
  const bot = await startTestBot();
  try {
    bot.model.enqueue(
      { text: 'Let me look that up.', toolUse: [{ name: 'memory_search', input: { query: 'deploy day' } }], chunkDelayMs: 20 },
      { text: 'Nothing on record about the deploy day yet.', chunkDelayMs: 20, chunks: ['Nothing on record ', 'about the deploy day yet.'] },
    );
    bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'when do we deploy?', mentionsBot: true });
    await turnDone(bot, GENERAL);
    assert.deepEqual(
      bot.discord.visibleReplies(GENERAL).map((reply) => reply.content),
      ['Let me look that up.\n\nNothing on record about the deploy day yet.'],
    );
    // The tool's input arrived through input_json_delta events and was parsed whole.
    const second = bot.model.requests[1]!.body;
    const call = second.messages.flatMap((message: { content: unknown }) => (Array.isArray(message.content) ? message.content : [])).find((block: { type: string }) => block.type === 'tool_use');
    assert.deepEqual(call.input, { query: 'deploy day' });
    const firstPost = bot.discord.posted.find((message) => message.channelId === GENERAL)!;
    const typingAfterPost = bot.discord.typing.filter((channel, index) => channel === GENERAL && bot.discord.typingAt[index]! >= firstPost.at!);
    assert.ok(typingAfterPost.length >= 1, 'typing shown again while the tool ran');
    // History: the words before the call as a note, the answer as the reply, each once.
    const assistant = (await bot.app.runtime.liveContext(GENERAL)).entries.filter((entry) => entry.kind === 'message' && entry.role === 'assistant');
    assert.deepEqual(assistant.map((entry) => entry.content), ['Let me look that up.', 'Nothing on record about the deploy day yet.']);
  } finally {
    await bot.close();
  }
});

test('stream_replies = false posts the answer once, complete, without edits', async () => {
  const bot = await startTestBot({ defaults: { streamReplies: false } });
  try {
    bot.model.enqueue({ text: 'All at once.' });
    bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'hi', mentionsBot: true });
    await turnDone(bot, GENERAL);
    assert.equal(bot.model.requests[0]!.body.stream, undefined);
    assert.deepEqual(bot.discord.visibleReplies(GENERAL).map((reply) => reply.content), ['All at once.']);
    assert.equal(bot.discord.edits.length, 0);
  } finally {
    await bot.close();
  }
});

test('a streamed reply a moderator deletes before it is finished leaves history like a finished one deleted in Discord', async () => {
  const bot = await startTestBot();
  try {
    const words = Array.from({ length: 10 }, (_, index) => `retracted${index} `);
    bot.model.enqueue({ text: words.join(''), chunks: words, chunkDelayMs: 150 });
    const asked = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'tell me', mentionsBot: true });
    const shown = await bot.discord.waitForPost((message) => message.messageReference?.message_id === asked);
    bot.discord.deleteMessage({ channelId: GENERAL, messageId: shown.id });
    await turnDone(bot, GENERAL);
    await waitUntil(async () => !(await bot.app.runtime.liveContext(GENERAL)).entries.some((entry) => entry.messageId === shown.id), 'the reply gone from history');
    bot.model.enqueue({ text: 'Next.' });
    const next = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'and now?', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.messageReference?.message_id === next);
    assert.ok(!JSON.stringify(bot.model.requests.at(-1)!.body).includes('retracted'), 'the model no longer sees the deleted reply');
  } finally {
    await bot.close();
  }
});

test('a streamed reply whose last edit fails while its turn is still recording it leaves no rejection unhandled (that would end the process)', async () => {
  const harness = await openHarness();
  try {
    // Recording takes a while (as on a network store); the failed edit comes back first.
    const runtime = new Proxy(harness.runtime, {
      get(target, key) {
        if (key === 'appendToTurn') {
          return async (...args: Parameters<typeof target.appendToTurn>) => {
            await new Promise((resolve) => setTimeout(resolve, 200));
            return target.appendToTurn(...args);
          };
        }
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    }) as ResponderRuntime;
    const model = new GatedModel();
    const responder = new ChannelResponder({ runtime, model, tools: [], config: harness.config, events: harness.stream });
    const asked = await harness.runtime.ingest(userMessage('c-stream', 1));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const outcome = responder.respond({
        channelId: 'c-stream',
        userId: asked.authorId,
        turnId: asked.turnId,
        rateLimit: false,
        context: { channelId: 'c-stream', guildId: 'g1', sourceMessageIds: [asked.messageId] },
        target: {
          send: async () => 'sent-1',
          stream: () => ({
            firstMessageId: '1001',
            update() {},
            // The message was deleted by a moderator: its last edit is refused at once.
            finish: () => Promise.reject(new Error('Unknown Message')),
            fail: async () => true,
          }),
        },
      });
      await waitUntil(() => model.calls.length === 1, 'the model asked');
      model.calls[0]!.answer('An answer.');
      assert.equal(await outcome, 'replied');
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    assert.deepEqual(unhandled.map(String), []);
    assert.ok(harness.events.some((event) => event.type === 'reply_failed'), 'the failed edit is logged');
  } finally {
    await harness.close();
  }
});
