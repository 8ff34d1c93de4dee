/**
 * The model-backed compaction worker end to end: the real SDK against the fake Messages API on
 * loopback, the real memory store, the channel runtime. Memories land, the summary is spliced;
 * every kind of model failure leaves history untouched; then the extractive fallback stands in.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLlmSummarizer } from '../src/compaction/llm-summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import { createAnthropicModel } from '../src/llm/index.js';
import { createMemoryTools, openMemoryStore } from '../src/memory/index.js';
import type { MemoryStore } from '../src/memory/types.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { ChannelRuntime } from '../src/channel/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { tempDir, testConfig, TickingClock, userMessage } from './compaction-support.js';
import { openTestDatabase } from './support/storage.js';

let fake: FakeAnthropic;
before(async () => {
  fake = await startFakeAnthropic();
});
after(async () => {
  await fake.close();
});

interface Setup {
  runtime: ChannelRuntime;
  memory: MemoryStore;
  db: SqlClient;
  events: MagpieEvent[];
  close(): Promise<void>;
}

/**
 * `workerTimeoutMs` is short only where a test waits for the timeout: a worker that must finish
 * gets seconds, so a loaded machine does not turn a success into a timeout.
 */
async function setup(options: { messages?: number; workerTimeoutMs?: number } = {}): Promise<Setup> {
  fake.reset();
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const memory = await openMemoryStore({ db, dataDir: dir.path, settings: { ...DEFAULTS.memory, dataDir: dir.path } });
  const model = createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-test', baseUrl: fake.baseUrl, maxRetries: 0, timeoutMs: 5000 }, { env: {} });
  const stream = new EventStream();
  const events: MagpieEvent[] = [];
  stream.subscribe((event) => events.push(event));
  const runtime = new ChannelRuntime({
    db,
    memory,
    config: new LiveConfig(testConfig({ contextWindow: 100_000, compaction: { workerTimeoutMs: options.workerTimeoutMs ?? 10_000, fallbackAfterFailures: 3 } })),
    events: stream,
    summarizer: createLlmSummarizer({ model, memoryTools: createMemoryTools(memory) }),
    clock: new TickingClock(),
  });
  for (let index = 0; index < (options.messages ?? 10); index += 1) await runtime.ingest(userMessage('c1', index));
  return {
    runtime,
    memory,
    db,
    events,
    async close() {
      await runtime.close();
      await memory.close();
      await db.close();
      dir.remove();
    },
  };
}

test('a worker saves memories with memory_save and its summary is spliced in', async () => {
  const { runtime, memory, events, close } = await setup();
  fake.enqueue(
    {
      toolUse: [
        { name: 'memory_save', input: { content: 'Alice prefers word42 over word43', memory_type: 'preference' } },
        { name: 'memory_save', input: { content: 'The team decided to ship on Friday', memory_type: 'decision', importance: 0.9 } },
      ],
    },
    { text: 'Alice listed words; the team decided to ship on Friday.' },
  );
  const outcome = await runtime.compactNow('c1');
  assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
  assert.equal(outcome.messagesCompacted, 5);
  const completed = events.find((event) => event.type === 'compaction_completed')!;
  assert.equal(completed.memories_saved, 2);
  assert.equal(completed.summarizer, 'llm');
  const context = await runtime.liveContext('c1');
  assert.equal(context.summaries.length, 1);
  assert.match(context.summaries[0]!.content, /ship on Friday/);
  assert.equal(context.entries.length, 5);
  const saved = await memory.list({ kind: 'memory' });
  assert.equal(saved.length, 2);
  assert.ok(saved.every((record) => record.channelId === 'c1'));
  // The worker was offered memory_save and nothing else.
  assert.deepEqual(fake.requests[0]!.body.tools.map((tool: { name: string }) => tool.name), ['memory_save']);
  // Compacted messages are still found by search, as transcript.
  const found = await memory.search({ location: { channelId: 'c1', guildId: 'g1' }, query: 'Message 1', kind: 'transcript', limit: 10 });
  assert.ok(found.some((result) => result.source_ids.includes('m1')));
  await close();
});

test('malformed memory_save input gets a tool error back; the worker still finishes', async () => {
  const { runtime, memory, close } = await setup();
  fake.enqueue(
    { toolUse: [{ name: 'memory_save', input: { content: '', memory_type: 'nonsense' } }] },
    { text: 'A summary after a rejected save.' },
  );
  const outcome = await runtime.compactNow('c1');
  assert.equal(outcome.status, 'completed');
  const results = fake.requests[1]!.body.messages.at(-1).content as Array<{ type: string; is_error?: boolean }>;
  assert.ok(results.some((block) => block.type === 'tool_result' && block.is_error === true));
  assert.equal((await memory.list({ kind: 'memory' })).length, 0);
  await close();
});

test('429, 500 and a timeout leave history untouched; after 3 failures the extractive fallback', async () => {
  const { runtime, events, close } = await setup({ workerTimeoutMs: 1000 });
  const before = await runtime.liveContext('c1');
  fake.enqueue({ status: 429 }, { status: 500 }, { delayMs: 8000, then: { text: 'too late' } });
  const reasons: string[] = [];
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const outcome = await runtime.compactNow('c1');
    assert.equal(outcome.status, 'failed');
    reasons.push(outcome.reason!);
    assert.deepEqual(await runtime.liveContext('c1'), before, 'history unchanged');
    assert.equal((await runtime.status('c1')).compactionRunning, false, 'lock released');
  }
  assert.equal(reasons[0], 'rate_limited');
  assert.equal(reasons[1], 'server_error');
  assert.equal(reasons[2], 'timeout');
  assert.equal(events.filter((event) => event.type === 'compaction_failed').length, 3);
  // Three failures in a row: the next compaction is extractive, and it succeeds offline.
  const outcome = await runtime.compactNow('c1');
  assert.equal(outcome.status, 'completed');
  assert.equal(events.find((event) => event.type === 'compaction_completed')!.summarizer, 'extractive');
  await close();
});

test('an empty summary from the model is a failure', async () => {
  const { runtime, close } = await setup();
  const before = await runtime.liveContext('c1');
  fake.enqueue({ text: '   ' });
  const outcome = await runtime.compactNow('c1');
  assert.equal(outcome.status, 'failed');
  assert.equal(outcome.reason, 'empty_summary');
  assert.deepEqual(await runtime.liveContext('c1'), before);
  await close();
});

test('memories saved by a worker carry the message ids of the range, not the ids of tool traffic', async () => {
  const { runtime, memory, close } = await setup({ messages: 0 });
  // A turn with tool traffic inside the range that will be compacted (the oldest half).
  const question = await runtime.ingest(userMessage('c1', 0));
  await runtime.appendToTurn(
    'c1',
    [
      { kind: 'tool_call', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_use', id: 'tu1', name: 'memory_search', input: { query: 'x' } }), messageId: 'tool-call-1' },
      { kind: 'tool_result', role: 'user', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_result', tool_use_id: 'tu1', content: '[]' }), messageId: 'tool-result-1' },
      { kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'Found nothing.', messageId: 'reply-1' },
    ],
    question.turnId,
  );
  for (let index = 1; index < 6; index += 1) await runtime.ingest(userMessage('c1', index));
  fake.enqueue(
    { toolUse: [{ name: 'memory_save', input: { content: 'Alice counts words in every message', memory_type: 'observation' } }] },
    { text: 'Alice counted words; a search found nothing.' },
  );
  const outcome = await runtime.compactNow('c1');
  assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
  const [saved] = await memory.list({ kind: 'memory' });
  assert.ok(saved, 'one memory saved');
  const compacted = (await runtime.liveContext('c1')).summaries[0]!;
  assert.ok(saved.sourceIds.length > 0);
  assert.ok(saved.sourceIds.includes('m0'), JSON.stringify(saved.sourceIds));
  assert.ok(!saved.sourceIds.some((id) => id.startsWith('tool-')), `no tool ids: ${JSON.stringify(saved.sourceIds)}`);
  assert.ok(compacted.toSeq >= 4, 'the range took the whole tool turn');
  // Every source id is a message the transcript archive knows.
  const transcript = await memory.search({ location: { channelId: 'c1', guildId: 'g1' }, query: 'Message', kind: 'transcript', limit: 20 });
  const archived = new Set(transcript.flatMap((result) => result.source_ids));
  for (const id of saved.sourceIds.filter((id) => id !== 'reply-1')) assert.ok(archived.has(id), id);
  await close();
});
