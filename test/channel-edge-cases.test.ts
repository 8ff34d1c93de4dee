/** Edge cases of the channel runtime: races with the archive, odd history shapes, crashes mid-turn. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HistoryStore } from '../src/channel/history-store.js';
import type { ContentBlock, ModelMessage } from '../src/llm/chat-model.js';
import { openHarness, tempDir, testConfig, userMessage } from './compaction-support.js';
import { failInserts } from './support/storage.js';

const bot = { authorId: 'bot', authorName: 'Magpie' } as const;
const toolCall = (id: string) => ({ kind: 'tool_call' as const, role: 'assistant' as const, ...bot, content: JSON.stringify({ type: 'tool_use', id, name: 'memory_search', input: { query: 'x' } }) });
const toolResult = (id: string) => ({ kind: 'tool_result' as const, role: 'user' as const, ...bot, content: JSON.stringify({ type: 'tool_result', tool_use_id: id, content: '[]' }) });

/** What the Messages API checks: user first, roles alternate, every tool_use answered right after, no stray result. */
function assertValidForApi(messages: readonly ModelMessage[]): void {
  assert.ok(messages.length > 0, 'at least one message');
  assert.equal(messages[0]!.role, 'user', 'the first message is from the user');
  for (let index = 0; index < messages.length; index += 1) {
    const message = messages[index]!;
    if (index > 0) assert.notEqual(message.role, messages[index - 1]!.role, `roles alternate at ${index}`);
    const blocks: ContentBlock[] = typeof message.content === 'string' ? [] : message.content;
    assert.ok(typeof message.content === 'string' || blocks.length > 0, `message ${index} has content`);
    for (const block of blocks) {
      if (block.type === 'text') assert.notEqual(block.text.trim(), '', `blank text block in message ${index}`);
    }
    const uses = blocks.filter((block) => block.type === 'tool_use').map((block) => (block as { id: string }).id);
    if (uses.length > 0) {
      const next = messages[index + 1];
      assert.ok(next, `tool_use in message ${index} is followed by a message`);
      const answered = new Set(
        (typeof next.content === 'string' ? [] : next.content)
          .filter((block) => block.type === 'tool_result')
          .map((block) => (block as { tool_use_id: string }).tool_use_id),
      );
      for (const id of uses) assert.ok(answered.has(id), `tool_use ${id} has its tool_result right after`);
    }
    const results = blocks.filter((block) => block.type === 'tool_result').map((block) => (block as { tool_use_id: string }).tool_use_id);
    if (results.length > 0) {
      const previous = messages[index - 1];
      const asked = new Set(
        (previous === undefined || typeof previous.content === 'string' ? [] : previous.content)
          .filter((block) => block.type === 'tool_use')
          .map((block) => (block as { id: string }).id),
      );
      for (const id of results) assert.ok(asked.has(id), `tool_result ${id} answers a tool_use of the message before`);
    }
  }
}

test('a message deleted while its transcript write is still in flight does not come back in the archive', async () => {
  const harness = await openHarness();
  const { runtime, memory } = harness;
  await runtime.ingest(userMessage('c1', 0));
  memory.holdArchives = true;
  const pending = runtime.ingest(userMessage('c1', 1));
  const deleted = runtime.deleteMessages('c1', ['m1']);
  memory.releaseArchives();
  await Promise.all([pending, deleted]);
  assert.deepEqual(memory.idsFor('c1'), ['m0'], 'the deleted message is not searchable');
  assert.deepEqual((await new HistoryStore(harness.db).archive('c1')).map((entry) => entry.messageId), ['m0']);
  await harness.close();
});

test('a message edited while its transcript write is still in flight ends up with the new text in the archive', async () => {
  const harness = await openHarness();
  const { runtime, memory } = harness;
  memory.holdArchives = true;
  const pending = runtime.ingest(userMessage('c1', 0));
  const edited = runtime.editMessage('c1', 'm0', 'corrected text');
  memory.releaseArchives();
  await Promise.all([pending, edited]);
  assert.equal(memory.transcript.get('c1|m0')?.content, 'corrected text');
  await harness.close();
});

test('a tool call whose result never came still gives a request the API accepts', async () => {
  const harness = await openHarness();
  const { runtime } = harness;
  const question = await runtime.ingest(userMessage('c1', 0));
  // The model was aborted mid-loop: the call is in history, its result is not.
  await runtime.appendToTurn('c1', [toolCall('t-lost')], question.turnId);
  await runtime.ingest(userMessage('c1', 1));
  assertValidForApi((await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 })).messages);
  // ...and when history ends on the unanswered call.
  await runtime.appendToTurn('c1', [toolCall('t-last')], question.turnId + 1);
  assertValidForApi((await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 })).messages);
  await harness.close();
});

test('a tool result whose call is not live is sent as text, not as a dangling tool_result', async () => {
  const harness = await openHarness();
  const { runtime } = harness;
  const question = await runtime.ingest(userMessage('c1', 0));
  await runtime.appendToTurn('c1', [toolResult('t-orphan'), { kind: 'message', role: 'assistant', ...bot, content: 'Done.' }], question.turnId);
  assertValidForApi((await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 })).messages);
  await harness.close();
});

test('a turn appended by appendToTurn is stored all or nothing (no half turn after a crash)', async () => {
  const dir = tempDir().path;
  const harness = await openHarness({ dir });
  const { runtime } = harness;
  const question = await runtime.ingest(userMessage('c1', 0));
  // The third insert fails, as a crash or a full disk would, midway through the turn.
  const restore = await failInserts(harness.db, 'history_entries', `NEW.content = 'boom'`);
  await assert.rejects(() =>
    runtime.appendToTurn('c1', [toolCall('t1'), toolResult('t1'), { kind: 'message', role: 'assistant', ...bot, content: 'boom' }], question.turnId),
  );
  await restore();
  assert.deepEqual((await runtime.liveContext('c1')).entries.map((entry) => entry.kind), ['message'], 'memory agrees with the database');
  const retried = await runtime.appendToTurn('c1', [toolCall('t1'), toolResult('t1')], question.turnId);
  assert.deepEqual(retried.map((entry) => entry.seq), [2, 3], 'seqs of the failed attempt are reused, not skipped');
  await harness.close({ keepDir: true });
  const second = await openHarness({ dir });
  assert.deepEqual(
    (await second.runtime.liveContext('c1')).entries.map((entry) => `${entry.seq}:${entry.kind}`),
    ['1:message', '2:tool_call', '3:tool_result'],
    'nothing of the failed attempt was kept, the retry was',
  );
  assertValidForApi((await second.runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 })).messages);
  await second.close();
});

test('after an emergency truncation that left no live message, the request still has a user message', async () => {
  const configValue = testConfig({ contextWindow: 200, systemPrompt: 'x'.repeat(1000) });
  const harness = await openHarness({ configValue });
  const { runtime } = harness;
  await runtime.ingest(userMessage('c1', 0));
  // The message just in stays through its own check (it may be answered); the next check drops it.
  await runtime.check('c1');
  assert.equal((await runtime.liveContext('c1')).entries.length, 0);
  assert.equal((await runtime.liveContext('c1')).summaries.length, 1);
  assertValidForApi((await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 })).messages);
  await harness.close();
});

test('a blank message from the bot in a replayed transcript is not sent as a blank text block', async () => {
  const harness = await openHarness();
  const { runtime } = harness;
  await runtime.ingest(userMessage('c1', 0));
  await runtime.ingest({ ...userMessage('c1', 1), role: 'assistant', authorName: 'Magpie', content: '  \n ' });
  await runtime.ingest(userMessage('c1', 2));
  assertValidForApi((await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 })).messages);
  await harness.close();
});
