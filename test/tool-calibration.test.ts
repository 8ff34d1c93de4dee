/**
 * Tool calls and results get their own correction. A channel whose turns carry large JSON tool
 * results runs against the fake Messages API counting that JSON as a tokenizer does (denser
 * than prose); `/context` must end near the fake's count and stay there when the channel goes
 * back to plain talk.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp } from '../src/app/index.js';
import { runAgentTurn } from '../src/channel/agent-turn.js';
import { describeContext } from '../src/app/channel-commands.js';
import { estimatedRoom } from '../src/context/request-room.js';
import type { ModelMessage } from '../src/llm/chat-model.js';
import { definitionsOf, type ToolHandler } from '../src/llm/tool.js';
import { characterTokenCounter, imageTokens, promptParts, startFakeAnthropic } from './fakes/fake-anthropic.js';
import { isAgentRequest, lastUserText, testConfig } from './discord-helpers.js';
import { appEnv } from './support/storage.js';

const TALK = [
  'Morning all, the release review moved to three this afternoon in room two, bring your notes.',
  'API tests are about eighty percent done; I will finish the rest tomorrow before lunch.',
  'The migration script needs another look, it timed out on staging last time we ran it.',
  'Could someone sort the user feedback by severity and send it over before Friday?',
];

/** Order records as an inventory service would return them: about 4,000 characters of JSON. */
function orders(from: number): string {
  return JSON.stringify(
    Array.from({ length: 24 }, (_, index) => ({
      id: from * 100 + index,
      sku: `SKU-${(from * 7919 + index * 104729) % 100000}`,
      qty: (index * 7) % 13,
      price: Math.round(((from + 1) * 1.37 + index * 2.11) * 100) / 100,
      shipped: index % 3 === 0,
      at: `2026-01-${String((index % 28) + 1).padStart(2, '0')}T10:00:00Z`,
    })),
  );
}

const LOOKUP: ToolHandler = {
  definition: {
    name: 'order_lookup',
    description: 'Looks up the orders of a customer.',
    input_schema: { type: 'object', properties: { customer: { type: 'integer' } }, required: ['customer'] },
  },
  run: (input) => ({ isError: false, content: orders(Number((input as { customer?: number }).customer ?? 0)) }),
};

test('tool results as large JSON: /context ends near the real count and stays there when the talk changes', async () => {
  // JSON records run at about 3 characters a token (`@anthropic-ai/tokenizer`); prose at 4.
  const count = characterTokenCounter({ toolCharsPerToken: 2.6 });
  const fake = await startFakeAnthropic({ countTokens: count, contextWindow: 100_000 });
  fake.setDefault((request) => {
    if (!isAgentRequest(request.body)) return { text: 'Summary: orders were looked up.' };
    const last = request.body.messages.at(-1);
    const answered = Array.isArray(last?.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
    const asked = /look up customer (\d+)/.exec(lastUserText(request.body));
    if (asked && !answered) return { toolUse: [{ name: 'order_lookup', input: { customer: Number(asked[1]) } }] };
    return { text: 'Done.' };
  });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-tools-'));
  const defaults = { contextWindow: 100_000, maxResponseTokens: 512 };
  const config = testConfig({ baseUrl: fake.baseUrl, dataDir, defaults });
  let app = await openApp({ config, env: appEnv() });
  const tools = [...app.tools, LOOKUP];
  const channelId = 'orders';
  let index = 0;
  const say = async (content: string) => {
    await app.runtime.ingest({ messageId: `m${index}`, channelId, guildId: 'g1', authorId: `u${index % 2}`, authorName: `P${index % 2}`, role: 'user', content, createdAt: Date.UTC(2026, 0, 1) + index * 60_000 });
    index += 1;
  };
  const turn = () =>
    app.runtime.runSerial(channelId, () =>
      runAgentTurn({ runtime: app.runtime, channelId, model: app.model!, tools, settings: app.config.settingsFor(channelId), context: { channelId, guildId: 'g1' } }),
    );
  const error = async () => {
    const real = count({ body: await app.runtime.buildModelRequest(channelId, { tools: definitionsOf(tools), maxTokens: 1 }) } as never);
    return ((await app.runtime.status(channelId)).calibratedTokens - real) / real;
  };
  try {
    // A few turns of talk first: the messages' factor is learnt from prose.
    for (let step = 0; step < 3; step += 1) {
      for (const line of TALK) await say(line);
      await turn();
    }
    const lookups: number[] = [];
    for (let customer = 1; customer <= 8; customer += 1) {
      await say(`${TALK[customer % TALK.length]} Please look up customer ${customer}.`);
      await turn();
      lookups.push(await error());
    }
    const learnt = (await app.runtime.status(channelId)).calibration;
    assert.ok(learnt.toolFactor !== undefined && learnt.toolFactor > 1.15, `tool results corrected apart from prose: ${JSON.stringify(learnt)}`);
    // One correction for everything (the messages' factor alone) is 6% under here, and trails the mix for turns.
    assert.ok(lookups.slice(1).every((value) => Math.abs(value) < 0.01), `/context within 1% from the second lookup: ${lookups.map((value) => value.toFixed(3)).join(' ')}`);
    // The talk goes back to prose: the share of tool results falls turn by turn.
    const talk: number[] = [];
    for (let step = 0; step < 12; step += 1) {
      for (const line of TALK) await say(`${line} ${line}`);
      await turn();
      talk.push(await error());
    }
    assert.ok(talk.every((value) => Math.abs(value) < 0.01), `/context stays within 1% as the mix changes: ${talk.map((value) => value.toFixed(3)).join(' ')}`);
    const after = (await app.runtime.status(channelId)).calibration;
    assert.ok(Math.abs(after.toolFactor! / learnt.toolFactor! - 1) < 0.03, `prose turns leave the tools' correction alone: ${learnt.toolFactor} → ${after.toolFactor}`);
    assert.match(describeContext(await app.runtime.status(channelId)), /tool calls and results × \d\.\d\d\)/);
    assert.ok(fake.requests.every((request) => request.refusal === undefined), 'nothing refused');

    // A restart on the same data finds both factors where they were, before any model answers.
    const before = await app.runtime.status(channelId);
    await app.close();
    app = await openApp({ config, env: appEnv() });
    const restarted = await app.runtime.status(channelId);
    assert.deepEqual(restarted.calibration, before.calibration);
    const factors = (status: typeof before) => /calibrated × .*$/m.exec(describeContext(status))![0];
    assert.equal(factors(restarted), factors(before), '/context shows the same factors');
  } finally {
    await app.close();
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the fake counts a tool result given as blocks by its text and its images by their pixels, as the API does', () => {
  const png = Buffer.alloc(64);
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png, 0);
  png.writeUInt32BE(13, 8);
  png.write('IHDR', 12, 'latin1');
  png.writeUInt32BE(750, 16);
  png.writeUInt32BE(100, 20);
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') } };
  const body = {
    messages: [
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'look', input: { q: 'x' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'found it' }, image] }] },
    ],
  };
  assert.deepEqual(promptParts(body), { text: '', tools: 'look {"q":"x"}\nfound it' });
  assert.equal(imageTokens(body), 100);
});

test('a branch or worker request counts its tool calls and results by the tools factor', () => {
  const messages: ModelMessage[] = [
    { role: 'user', content: 'Your task: find the orders.' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'memory_search', input: { query: 'orders' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: orders(1) }] },
  ];
  const request = { system: 'You are a worker.', messages };
  const at = (tools: number) => estimatedRoom({ contextWindow: 100_000, minTokens: 256, factor: () => 1, toolFactor: () => tools }).inputTokens(request, 0);
  const plain = estimatedRoom({ contextWindow: 100_000, minTokens: 256, factor: () => 1 }).inputTokens(request, 0);
  assert.equal(at(1), plain, 'a tools factor equal to the messages factor changes nothing');
  assert.ok(at(1.5) > plain * 1.4, `the tool traffic is most of it: ${plain} → ${at(1.5)}`);
});
