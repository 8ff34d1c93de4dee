import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp } from '../src/app/index.js';
import { NO_ANSWER_REPLY, runAgentTurn } from '../src/channel/agent-turn.js';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { testConfig } from './discord-helpers.js';
import { appEnv } from './support/storage.js';

async function withApp(work: (context: Awaited<ReturnType<typeof setup>>) => Promise<void>): Promise<void> {
  const context = await setup();
  try {
    await work(context);
  } finally {
    await context.app.close();
    await context.model.close();
    rmSync(context.dataDir, { recursive: true, force: true });
  }
}

async function setup() {
  const model = await startFakeAnthropic();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-agent-'));
  const app = await openApp({ config: testConfig({ baseUrl: model.baseUrl, dataDir }), env: appEnv() });
  return { model, dataDir, app };
}

test('an agent turn runs the tools, appends calls, results and reply to the turn, and saves memory', async () => {
  await withApp(async ({ app, model }) => {
    const channelId = 'c-agent';
    const entry = await app.runtime.ingest({
      messageId: 'm1',
      channelId,
      guildId: 'g1',
      authorId: 'u1',
      authorName: 'Dana',
      role: 'user',
      content: 'please remember that I am allergic to peanuts',
      createdAt: Date.now(),
    });
    model.enqueue(
      { toolUse: [{ name: 'memory_save', input: { content: 'Dana is allergic to peanuts', memory_type: 'fact' } }], text: 'Saving that.' },
      { text: 'Noted, Dana: no peanuts.' },
    );
    let delivered = '';
    const result = await runAgentTurn({
      runtime: app.runtime,
      channelId,
      model: app.model!,
      tools: app.tools,
      settings: app.config.settingsFor(channelId),
      context: { channelId, guildId: 'g1', sourceMessageIds: ['m1'] },
      self: { id: 'bot', name: 'Magpie' },
      deliver: async (reply) => {
        delivered = reply;
        return 'posted-1';
      },
    });
    assert.equal(result.reply, 'Noted, Dana: no peanuts.');
    assert.equal(delivered, result.reply);
    assert.equal(result.steps, 2);
    assert.ok(result.spentTokens > 0);

    const entries = (await app.runtime.liveContext(channelId)).entries;
    assert.deepEqual(
      entries.map((candidate) => [candidate.kind, candidate.role]),
      [
        ['message', 'user'],
        ['message', 'assistant'],
        ['tool_call', 'assistant'],
        ['tool_result', 'user'],
        ['message', 'assistant'],
      ],
    );
    assert.ok(entries.every((candidate) => candidate.turnId === entry.turnId), 'all in the triggering turn');
    assert.equal(entries.at(-1)!.messageId, 'posted-1');

    // The first request was exactly what the runtime builds: persona, tools, the message.
    const first = model.requests[0]!.body;
    assert.ok(first.system.startsWith('You are Magpie'));
    assert.deepEqual(first.tools.map((tool: { name: string }) => tool.name).sort(), ['branch', 'memory_save', 'memory_search', 'spawn_worker']);
    assert.match(JSON.stringify(first.messages), /Dana: please remember/);

    const memories = await app.memory.search({ location: { channelId, guildId: 'g1' }, query: 'peanuts allergy', kind: 'memory' });
    assert.ok(memories.some((memory) => memory.content.includes('peanuts') && memory.source_ids.includes('m1')));

    // The next request replays the whole turn as valid blocks.
    model.enqueue({ text: 'second answer' });
    await app.runtime.ingest({ messageId: 'm2', channelId, authorId: 'u1', authorName: 'Dana', role: 'user', content: 'thanks', createdAt: Date.now() });
    await runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools: app.tools, settings: app.config.settingsFor(channelId), context: { channelId } });
    const second = model.requests.at(-1)!.body;
    const kinds = second.messages.flatMap((message: { content: Array<{ type: string }> }) => message.content.map((block) => block.type));
    assert.ok(kinds.includes('tool_use') && kinds.includes('tool_result'));
  });
});

test('a turn that spends every step on tools still answers', async () => {
  await withApp(async ({ app, model }) => {
    const channelId = 'c-steps';
    await app.runtime.ingest({ messageId: 'x1', channelId, authorId: 'u1', authorName: 'Eli', role: 'user', content: 'look everything up', createdAt: Date.now() });
    model.setDefault({ toolUse: [{ name: 'memory_search', input: { query: 'everything' } }] });
    const settings = { ...app.config.settingsFor(channelId), maxAgentSteps: 2 };
    const result = await runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools: app.tools, settings, context: { channelId } });
    assert.equal(result.reply, NO_ANSWER_REPLY);
    assert.equal(result.steps, 2);
    const last = (await app.runtime.liveContext(channelId)).entries.at(-1)!;
    assert.equal(last.content, NO_ANSWER_REPLY);
  });
});

test('shutdown stays bounded when an aborted turn is stuck delivering its reply', { timeout: 20_000 }, async () => {
  await withApp(async ({ app, model }) => {
    const channelId = 'c-stuck';
    await app.runtime.ingest({
      messageId: 'm1',
      channelId,
      authorId: 'u1',
      authorName: 'Eli',
      role: 'user',
      content: 'hello',
      createdAt: Date.now(),
    });
    model.enqueue({ text: 'Hi Eli.' });
    let sendStarted!: () => void;
    const sending = new Promise<void>((resolve) => (sendStarted = resolve));
    const abandoned: unknown[] = [];
    app.events.subscribe((event) => {
      if (event.type === 'shutdown_turns_abandoned') abandoned.push(event);
    });
    // Like a Discord send stuck in REST retries: it never settles, and ignores the abort.
    void app.responder.respond({
      channelId,
      userId: 'u1',
      context: { channelId },
      target: {
        send: () => {
          sendStarted();
          return new Promise<string | undefined>(() => {});
        },
      },
    });
    await sending;
    await app.responder.drain(10);
    assert.equal(abandoned.length, 1, 'the stuck turn is reported, and drain returned');
  });
});
