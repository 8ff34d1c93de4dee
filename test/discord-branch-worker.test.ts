import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ALICE, GENERAL, MOD, QUIET, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';
import { isBranchRequest, isCompactionRequest, isWorkerRequest } from './branch-worker-support.js';
import type { FakeReply, RecordedRequest } from './fakes/fake-anthropic.js';

const UNSCRIPTED: FakeReply = { status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } };

/** The channel agent is the caller offered `branch`. */
function isChannelRequest(request: RecordedRequest): boolean {
  return ((request.body?.tools ?? []) as Array<{ name: string }>).some((tool) => tool.name === 'branch');
}

function lastToolResult(request: RecordedRequest): string | undefined {
  const last = request.body.messages.at(-1) as { content: string | Array<{ type: string; content?: string }> };
  if (typeof last.content === 'string') return undefined;
  return last.content.find((block) => block.type === 'tool_result')?.content;
}

describe('branches and workers through the fake Discord', () => {
  let bot: TestBot;
  before(async () => {
    bot = await startTestBot();
  });
  after(() => bot.close());

  test('a mention that makes the model call branch gets an answer built from the branch conclusion', async () => {
    bot.model.reset();
    bot.model.setDefault((request) => {
      if (isBranchRequest(request)) return { text: 'Memory says the boiler code is 4471 (Alice, last spring).' };
      if (isCompactionRequest(request)) return { text: 'They talked.' };
      if (!isChannelRequest(request)) return UNSCRIPTED;
      const result = lastToolResult(request);
      return result === undefined
        ? { toolUse: [{ name: 'branch', input: { question: 'What is the boiler code?' } }] }
        : { text: `From my notes: ${result}` };
    });
    const asked = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'what was the boiler code again?', mentionsBot: true });
    const reply = await bot.discord.waitForPost((message) => message.content.startsWith('From my notes:'), { timeoutMs: 15_000 });
    // Replies stream: the first post may hold only the start; the last edit holds the answer.
    const answer = 'From my notes: Memory says the boiler code is 4471 (Alice, last spring).';
    await waitUntil(() => bot.discord.contentOf(reply.id) === answer, 'the streamed answer complete', 15_000);
    assert.equal(reply.messageReference?.message_id, asked);
    const branchRequest = bot.model.requests.find(isBranchRequest)!;
    assert.match(JSON.stringify(branchRequest.body.messages), /what was the boiler code again\?/, 'the branch saw the forked conversation');
    await waitUntil(async () => (await bot.app.runtime.liveContext(GENERAL)).entries.at(-1)?.messageId === reply.id, 'the reply in history');
    const kinds = (await bot.app.runtime.liveContext(GENERAL)).entries.slice(-3).map((entry) => entry.kind);
    assert.deepEqual(kinds, ['tool_call', 'tool_result', 'message']);
    assert.ok(bot.events.some((event) => event.type === 'branch_completed' && event.channel_id === GENERAL && event.status === 'answered'));
  });

  test('a spawn_worker task posts its report in the channel, as a reply to the asking message, and in history', async () => {
    bot.model.reset();
    bot.model.setDefault((request) => {
      if (isWorkerRequest(request)) return { text: 'Nobody mentioned the boiler before last spring.' };
      if (isCompactionRequest(request)) return { text: 'They talked.' };
      if (!isChannelRequest(request)) return UNSCRIPTED;
      const result = lastToolResult(request);
      if (result === undefined) return { toolUse: [{ name: 'spawn_worker', input: { task: 'Find every mention of the boiler.' } }] };
      return { text: `On it: ${(JSON.parse(result) as { worker_id: string }).worker_id} started.` };
    });
    const asked = bot.discord.sendMessage({ channelId: QUIET, authorId: ALICE, content: 'go through the history for the boiler', mentionsBot: true });
    const started = await bot.discord.waitForPost((message) => message.channelId === QUIET && message.content.startsWith('On it:'), { timeoutMs: 15_000 });
    const workerId = /w-[0-9a-f]{8}/.exec(started.content)![0];
    const report = await bot.discord.waitForPost((message) => message.content.startsWith(`[worker ${workerId} report]`), { timeoutMs: 15_000 });
    assert.equal(report.channelId, QUIET);
    assert.equal(report.messageReference?.message_id, asked, 'a reply to the message that asked');
    assert.match(report.content, /Nobody mentioned the boiler before last spring\./);
    await waitUntil(async () => (await bot.app.runtime.liveContext(QUIET)).entries.some((entry) => entry.messageId === report.id), 'the report in history');
    const entry = (await bot.app.runtime.liveContext(QUIET)).entries.find((candidate) => candidate.messageId === report.id)!;
    assert.equal(entry.role, 'assistant');
    assert.equal(entry.content, report.content);
    assert.ok(bot.events.some((event) => event.type === 'worker_completed' && event.channel_id === QUIET));
  });

  test('/tasks lists a running worker; /tasks cancel needs Manage Messages, stops it, and the channel goes on', async () => {
    bot.model.reset();
    let talk = 0;
    bot.model.setDefault((request) => {
      if (isWorkerRequest(request)) return { delayMs: 60_000, then: { text: 'too late' } };
      if (isCompactionRequest(request)) return { text: 'They talked.' };
      if (!isChannelRequest(request)) return UNSCRIPTED;
      const result = lastToolResult(request);
      if (lastUserTextOf(request).includes('count the stars') && result === undefined) {
        return { toolUse: [{ name: 'spawn_worker', input: { task: 'Count the stars mentioned in this channel.' } }] };
      }
      talk += 1;
      return { text: `reply ${talk}` };
    });
    bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'please count the stars', mentionsBot: true });
    await waitUntil(async () => (await bot.app.workers.list(GENERAL)).length === 1, 'the worker to start', 15_000);
    const workerId = (await bot.app.workers.list(GENERAL))[0]!.id;

    const listed = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'tasks', subcommand: 'list' });
    const listing = await bot.discord.waitForInteractionReply((reply) => reply.token === listed.token);
    assert.match(listing.content ?? '', new RegExp(`${workerId} · started \\d+ s ago · segment 1 · \\d+ tokens · “Count the stars mentioned in this channel\\.”`));

    const refused = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'tasks', subcommand: 'cancel', options: { id: workerId } });
    assert.match((await bot.discord.waitForInteractionReply((reply) => reply.token === refused.token)).content ?? '', /need the Manage Messages permission/);
    assert.equal((await bot.app.workers.list(GENERAL)).length, 1);

    const unknown = bot.discord.sendInteraction({ channelId: GENERAL, userId: MOD, name: 'tasks', subcommand: 'cancel', options: { id: 'w-nope; DROP' }, permissions: '8192' });
    assert.match((await bot.discord.waitForInteractionReply((reply) => reply.token === unknown.token)).content ?? '', /is not a worker id/);

    const cancel = bot.discord.sendInteraction({ channelId: GENERAL, userId: MOD, name: 'tasks', subcommand: 'cancel', options: { id: workerId }, permissions: '8192' });
    assert.match((await bot.discord.waitForInteractionReply((reply) => reply.token === cancel.token)).content ?? '', new RegExp(`Cancelling worker ${workerId}`));
    const report = await bot.discord.waitForPost((message) => message.content.startsWith(`[worker ${workerId} cancelled]`), { timeoutMs: 15_000 });
    assert.match(report.content, /cancelled by mod/);
    await waitUntil(async () => (await bot.app.workers.list(GENERAL)).length === 0, 'the worker to stop');

    const afterList = bot.discord.sendInteraction({ channelId: GENERAL, userId: ALICE, name: 'tasks', subcommand: 'list' });
    assert.equal((await bot.discord.waitForInteractionReply((reply) => reply.token === afterList.token)).content, 'No workers are running in this channel.');

    const before = talk;
    bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'still there?', mentionsBot: true });
    await bot.discord.waitForPost((message) => message.content === `reply ${before + 1}`, { timeoutMs: 15_000 });
    // History stays valid for the model: every tool call still has its result.
    const entries = (await bot.app.runtime.liveContext(GENERAL)).entries;
    const calls = entries.filter((entry) => entry.kind === 'tool_call').length;
    assert.equal(entries.filter((entry) => entry.kind === 'tool_result').length, calls);
  });
});

function lastUserTextOf(request: RecordedRequest): string {
  const last = [...request.body.messages].reverse().find((message: { role: string }) => message.role === 'user') as { content: unknown };
  return JSON.stringify(last?.content ?? '');
}
