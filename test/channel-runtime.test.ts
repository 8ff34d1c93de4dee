import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ToolDefinition } from '../src/llm/chat-model.js';
import { openHarness, tempDir, testConfig, userMessage } from './compaction-support.js';
import { estimateTokens } from '../src/context/token-estimate.js';

test('ingest appends, archives, is idempotent, and restores after a restart', async () => {
  const dir = tempDir().path;
  const first = await openHarness({ dir });
  for (let index = 0; index < 5; index += 1) await first.runtime.ingest(userMessage('c1', index));
  const again = await first.runtime.ingest(userMessage('c1', 2));
  assert.equal(again.seq, 3, 'a repeated message id returns the stored entry');
  assert.equal((await first.runtime.liveContext('c1')).entries.length, 5);
  assert.equal(first.memory.idsFor('c1').length, 5);
  const before = await first.runtime.liveContext('c1');
  const request = await first.runtime.buildModelRequest('c1', { tools: [], maxTokens: 100 });
  await first.close({ keepDir: true });

  const second = await openHarness({ dir });
  const after = await second.runtime.liveContext('c1');
  assert.deepEqual(after, before);
  assert.deepEqual(await second.runtime.buildModelRequest('c1', { tools: [], maxTokens: 100 }), request);
  const next = await second.runtime.ingest(userMessage('c1', 5));
  assert.equal(next.seq, 6);
  assert.ok(next.turnId > before.entries[4]!.turnId);
  await second.close();
});

test('buildModelRequest alternates roles, pairs tool blocks, and the estimate covers it', async () => {
  const tools: ToolDefinition[] = [{ name: 'memory_search', description: 'search memory', input_schema: { type: 'object' } }];
  const harness = await openHarness({ toolDefinitions: tools });
  const { runtime } = harness;
  const first = await runtime.ingest({ ...userMessage('c1', 1), content: 'What did we decide?' });
  await runtime.ingest({ ...userMessage('c1', 2, { author: 'bob' }), content: 'Yes, tell us.' });
  await runtime.appendToTurn(
    'c1',
    [
      { kind: 'tool_call', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_use', id: 't1', name: 'memory_search', input: { query: 'decision' } }) },
      { kind: 'tool_result', role: 'user', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_result', tool_use_id: 't1', content: '[]' }) },
      { kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'Nothing recorded yet.', messageId: 'reply-1' },
    ],
    first.turnId,
  );
  const request = await runtime.buildModelRequest('c1', { tools, maxTokens: 256 });
  // Bob wrote while the turn was running: his message follows the reply it did not get, so the
  // request ends with it (see test/model-request-order.test.ts).
  assert.deepEqual(
    request.messages.map((message) => message.role),
    ['user', 'assistant', 'user', 'assistant', 'user'],
  );
  assert.deepEqual(request.messages[0]!.content, [{ type: 'text', text: 'alice: What did we decide?' }]);
  assert.deepEqual(request.messages[4]!.content, [{ type: 'text', text: 'bob: Yes, tell us.' }]);
  assert.equal((request.messages[1]!.content as Array<{ type: string }>)[0]!.type, 'tool_use');
  assert.equal((request.messages[2]!.content as Array<{ type: string }>)[0]!.type, 'tool_result');
  const sent = estimateTokens(request.system) + estimateTokens(JSON.stringify(request.tools)) +
    estimateTokens(JSON.stringify(request.messages));
  const estimate = (await runtime.status('c1')).estimatedTokens;
  assert.ok(estimate >= estimateTokens(request.system) + estimateTokens(JSON.stringify(request.tools)));
  assert.ok(estimate <= sent * 1.5, `estimate ${estimate} should be near what is sent (${sent})`);
  // The reply posted to Discord comes back through the gateway: not appended twice.
  await runtime.ingest({ ...userMessage('c1', 3), messageId: 'reply-1', role: 'assistant', content: 'Nothing recorded yet.' });
  assert.equal((await runtime.liveContext('c1')).entries.length, 5);
  await harness.close();
});

test('edits change content and totals; deletions leave history and archive', async () => {
  const harness = await openHarness();
  const { runtime, memory } = harness;
  for (let index = 0; index < 4; index += 1) await runtime.ingest(userMessage('c1', index));
  const before = (await runtime.status('c1')).estimatedTokens;
  assert.equal(await runtime.editMessage('c1', 'm1', 'short'), true);
  assert.ok((await runtime.status('c1')).estimatedTokens < before);
  assert.equal((await runtime.liveContext('c1')).entries[1]!.content, 'short');
  assert.equal(memory.transcript.get('c1|m1')!.content, 'short');
  assert.equal(await runtime.deleteMessages('c1', ['m2', 'unknown']), 1);
  assert.deepEqual((await runtime.liveContext('c1')).entries.map((entry) => entry.messageId), ['m0', 'm1', 'm3']);
  assert.equal(memory.transcript.has('c1|m2'), false);
  assert.equal((await runtime.status('c1')).archivedMessages, 3);
  await harness.close();
});

test('runSerial runs one turn at a time per channel, channels in parallel', async () => {
  const harness = await openHarness();
  const order: string[] = [];
  // a1 is held open until b1 has run: that can only finish if channel b does not wait for a.
  let releaseA1!: () => void;
  const a1Held = new Promise<void>((resolve) => (releaseA1 = resolve));
  const turn = (label: string, before: Promise<void> = Promise.resolve()) => async () => {
    order.push(`${label} start`);
    await before;
    order.push(`${label} end`);
    if (label === 'b1') releaseA1();
    return label;
  };
  await Promise.all([
    harness.runtime.runSerial('a', turn('a1', a1Held)),
    harness.runtime.runSerial('a', turn('a2')),
    harness.runtime.runSerial('b', turn('b1')),
  ]);
  assert.ok(order.indexOf('b1 end') < order.indexOf('a1 end'), `b ran while a1 was running: ${order.join(', ')}`);
  assert.ok(order.indexOf('a1 end') < order.indexOf('a2 start'), `a2 waited for a1: ${order.join(', ')}`);
  await harness.close();
});

test('a thread inherits its parent channel settings until it has its own', async () => {
  const base = testConfig({ contextWindow: 2000 });
  const parentSettings = { ...base.defaults, contextWindow: 900 };
  const harness = await openHarness({ configValue: { ...base, channels: { parent: parentSettings } } });
  await harness.runtime.ingest({ ...userMessage('thread-1', 0), parentChannelId: 'parent' });
  await harness.runtime.ingest(userMessage('other', 0));
  assert.equal((await harness.runtime.status('thread-1')).contextWindow, 900);
  assert.equal((await harness.runtime.status('other')).contextWindow, 2000);
  await harness.close();
});
