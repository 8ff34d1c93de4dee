/**
 * A memory drawn from a deleted message and from others, that paraphrases the deleted one
 * rather than quoting it: a marker at once, then the model (the real SDK against the fake
 * Messages API) restates it from the remaining messages only. Without a model, when the model
 * fails, or when no source remains, the memory is deleted instead. Checked down to the bytes the
 * database serves and, on SQLite, the bytes of its files.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { ChannelRuntime } from '../src/channel/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { createLlmSummarizer } from '../src/compaction/llm-summarizer.js';
import { MEMORY_RESTATE_SYSTEM_PROMPT } from '../src/compaction/memory-restatement.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import { createAnthropicModel } from '../src/llm/index.js';
import { createMemoryTools, MEMORY_REWRITE_MARKER, openMemoryStore } from '../src/memory/index.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { startFakeAnthropic, type FakeAnthropic, type FakeReply, type RecordedRequest } from './fakes/fake-anthropic.js';
import { systemText } from './fakes/fake-prompt-cache.js';
import { tempDir, testConfig } from './compaction-support.js';
import { openTestDatabase, TEST_STORAGE } from './support/storage.js';

const CHANNEL = 'c-mem';
/** Alice's message, deleted below; the memory says the same in other words. */
const SECRET = 'I keep the spare car key inside the left wellington boot by the shed';
const PARAPHRASE = 'Alice stores her backup vehicle key in a rubber boot near the garden shed; Bob feeds the cat at six.';
/** Stretches of the paraphrase that any copy of it would carry. */
const OLD_FRAGMENTS = ['backup vehicle key', 'rubber boot near the garden'];
const RESTATED = 'Bob feeds the cat at six every evening.';

let fake: FakeAnthropic;
before(async () => {
  fake = await startFakeAnthropic();
});
after(async () => fake.close());

interface Setup {
  dir: string;
  runtime: ChannelRuntime;
  memory: Awaited<ReturnType<typeof openMemoryStore>>;
  db: SqlClient;
  events: MagpieEvent[];
  /** Closes the runtime alone (as a shutdown does first); `close` then closes the rest. */
  closeRuntime(): Promise<void>;
  close(): Promise<void>;
}

async function setup(options: { offline?: boolean } = {}): Promise<Setup> {
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
    config: new LiveConfig(testConfig({ contextWindow: 100_000, compaction: { workerTimeoutMs: 10_000 } })),
    events: stream,
    summarizer: options.offline ? createExtractiveSummarizer() : createLlmSummarizer({ model, memoryTools: createMemoryTools(memory) }),
  });
  const said = [
    { messageId: 'm0', authorName: 'alice', content: SECRET },
    { messageId: 'm1', authorName: 'bob', content: 'I feed the cat at six every evening' },
    { messageId: 'm2', authorName: 'carol', content: 'the bakery on the corner closes early on Sundays' },
  ];
  for (const [index, message] of said.entries()) {
    await runtime.ingest({ ...message, channelId: CHANNEL, authorId: `u-${message.authorName}`, role: 'user', createdAt: Date.UTC(2026, 0, 1) + index * 60_000 });
  }
  let runtimeClosed: Promise<void> | undefined;
  const closeRuntime = () => (runtimeClosed ??= runtime.close());
  return {
    dir: dir.path,
    runtime,
    memory,
    db,
    events,
    closeRuntime,
    async close() {
      await closeRuntime();
      await memory.close();
      await db.close();
      dir.remove();
    },
  };
}

function isRestate(request: RecordedRequest): boolean {
  return systemText(request.body) === MEMORY_RESTATE_SYSTEM_PROMPT;
}

async function memories(setup: Setup): Promise<Array<{ content: string; sourceIds: string[] }>> {
  return (await setup.memory.list({ location: { channelId: CHANNEL }, kind: 'memory' })).map(({ content, sourceIds }) => ({ content, sourceIds }));
}

/** What the database serves: no row of any table that could reach the model holds `fragment`. */
async function rowsHolding(db: SqlClient, fragment: string): Promise<string[]> {
  const found: string[] = [];
  for (const table of ['history_entries', 'history_summaries', 'memory_items']) {
    const rows = await db.prepare(`SELECT content FROM ${table} WHERE lower(content) LIKE ?`).all(`%${fragment.toLowerCase()}%`);
    if (rows.length > 0) found.push(table);
  }
  return found;
}

/** On SQLite, whether any file of the data dir (database, WAL, index files) holds `fragment`. */
function filesHolding(dir: string, fragment: string): string[] {
  if (TEST_STORAGE !== 'sqlite') return [];
  const walk = (at: string): string[] =>
    readdirSync(at).flatMap((name) => {
      const file = path.join(at, name);
      return statSync(file).isDirectory() ? walk(file) : [file];
    });
  return walk(dir).filter((file) => readFileSync(file).includes(Buffer.from(fragment)));
}

test('a memory that paraphrases a deleted message shows a marker, then the model restates it from the other message', async () => {
  const harness = await setup();
  try {
    await harness.memory.save({ location: { channelId: CHANNEL }, content: PARAPHRASE, memoryType: 'fact', sourceIds: ['m0', 'm1'] });
    assert.deepEqual(await rowsHolding(harness.db, OLD_FRAGMENTS[0]!), ['memory_items'], 'precondition: the memory is stored');
    if (TEST_STORAGE === 'sqlite') assert.ok(filesHolding(harness.dir, OLD_FRAGMENTS[0]!).length > 0, 'precondition: and in the files');
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    fake.setDefault((request): FakeReply => {
      if (!isRestate(request)) return { status: 500 };
      return async () => {
        await held;
        return { text: RESTATED };
      };
    });

    await harness.runtime.deleteMessages(CHANNEL, ['m0']);
    // Until the rewrite lands: a marker, found by no search, and the old words gone from the rows and files.
    assert.deepEqual(await memories(harness), [{ content: MEMORY_REWRITE_MARKER, sourceIds: ['m1'] }]);
    const meanwhile = await harness.memory.search({ location: { channelId: CHANNEL }, query: 'backup vehicle key rubber boot' });
    assert.equal(JSON.stringify(meanwhile).includes('rubber boot'), false);
    for (const fragment of OLD_FRAGMENTS) {
      assert.deepEqual(await rowsHolding(harness.db, fragment), [], `rows hold "${fragment}" while the rewrite runs`);
      assert.deepEqual(filesHolding(harness.dir, fragment), [], `files hold "${fragment}" while the rewrite runs`);
    }

    release();
    await harness.runtime.privacySettled();
    assert.deepEqual(await memories(harness), [{ content: RESTATED, sourceIds: ['m1'] }]);
    assert.ok(harness.events.some((event) => event.type === 'memory_rewritten' && event.channel_id === CHANNEL));
    const requests = fake.requests.filter(isRestate);
    assert.equal(requests.length, 1);
    const sent = JSON.stringify(requests[0]!.body);
    assert.ok(sent.includes('rubber boot'), 'the model is given the memory to restate');
    assert.ok(sent.includes('I feed the cat at six every evening'), 'and the message it still rests on');
    assert.ok(!sent.includes('wellington'), 'never the deleted message');
    assert.ok(!sent.includes('bakery'), 'nor a message it was not drawn from');

    await harness.memory.whenIndexed();
    const found = await harness.memory.search({ location: { channelId: CHANNEL }, query: 'who feeds the cat', kind: 'memory' });
    assert.equal(found[0]?.content, RESTATED, 'the restated memory is searchable');
    for (const fragment of OLD_FRAGMENTS) {
      assert.deepEqual(await rowsHolding(harness.db, fragment), [], `rows hold "${fragment}"`);
      assert.deepEqual(filesHolding(harness.dir, fragment), [], `files hold "${fragment}"`);
    }
    assert.deepEqual(await rowsHolding(harness.db, RESTATED), ['memory_items'], 'the restated text is stored');
    if (TEST_STORAGE === 'sqlite') assert.ok(filesHolding(harness.dir, RESTATED).length > 0, 'and in the files');
  } finally {
    await harness.close();
  }
});

test("a memory resting on the bot's reply that quoted the deleted message: the model gets the reply without the quote", async () => {
  const harness = await setup();
  try {
    // The bot answered Alice by quoting her, and a worker drew a memory from both lines.
    await harness.runtime.ingest({ messageId: 'r0', channelId: CHANNEL, authorId: 'bot', authorName: 'Magpie', role: 'assistant', content: `You said: ${SECRET}. Noted!`, createdAt: Date.UTC(2026, 0, 1) + 5 * 60_000 });
    await harness.memory.save({ location: { channelId: CHANNEL }, content: PARAPHRASE, memoryType: 'fact', sourceIds: ['m0', 'r0', 'm1'] });
    fake.setDefault((request): FakeReply => (isRestate(request) ? { text: RESTATED } : { status: 500 }));

    await harness.runtime.deleteMessages(CHANNEL, ['m0']);
    await harness.runtime.privacySettled();
    const requests = fake.requests.filter(isRestate);
    assert.equal(requests.length, 1);
    const sent = JSON.stringify(requests[0]!.body);
    assert.ok(sent.includes('Noted!'), 'the reply it still rests on is sent');
    assert.ok(!sent.includes('wellington'), "never the deleted message, not even as the reply's quote of it");
    assert.deepEqual(await memories(harness), [{ content: RESTATED, sourceIds: ['r0', 'm1'] }]);
    assert.deepEqual(await rowsHolding(harness.db, 'wellington'), [], 'no row holds the deleted words');
  } finally {
    await harness.close();
  }
});

test('a memory with no other source goes without asking the model; the model answering NONE deletes it too', async () => {
  const harness = await setup();
  try {
    await harness.memory.save({ location: { channelId: CHANNEL }, content: PARAPHRASE, memoryType: 'fact', sourceIds: ['m0'] });
    await harness.memory.save({ location: { channelId: CHANNEL }, content: 'Carol says the corner bakery shuts early on Sundays.', memoryType: 'fact', sourceIds: ['m2', 'm1'] });
    fake.setDefault((request) => (isRestate(request) ? { text: 'NONE' } : { status: 500 }));
    await harness.runtime.deleteMessages(CHANNEL, ['m0']);
    await harness.runtime.privacySettled();
    assert.equal(fake.requests.filter(isRestate).length, 0, 'nothing to restate: no model call');
    assert.deepEqual((await memories(harness)).map((memory) => memory.content), ['Carol says the corner bakery shuts early on Sundays.']);
    for (const fragment of OLD_FRAGMENTS) assert.deepEqual(await rowsHolding(harness.db, fragment), []);

    await harness.runtime.deleteMessages(CHANNEL, ['m2']);
    await harness.runtime.privacySettled();
    assert.equal(fake.requests.filter(isRestate).length, 1);
    assert.deepEqual(await memories(harness), [], 'the other message supports none of it');
    assert.ok(harness.events.some((event) => event.type === 'memory_rewrite_dropped' && event.reason === 'unsupported'));
  } finally {
    await harness.close();
  }
});

test('without a model, or when the model fails, a memory that lost a source is deleted and the drop logged', async () => {
  const offline = await setup({ offline: true });
  try {
    await offline.memory.save({ location: { channelId: CHANNEL }, content: PARAPHRASE, memoryType: 'fact', sourceIds: ['m0', 'm1'] });
    await offline.runtime.deleteMessages(CHANNEL, ['m0']);
    assert.deepEqual(await memories(offline), []);
    const dropped = offline.events.find((event) => event.type === 'memory_rewrite_dropped');
    assert.equal(dropped?.reason, 'no_model');
    assert.equal(dropped?.memories, 1);
    for (const fragment of OLD_FRAGMENTS) assert.deepEqual(await rowsHolding(offline.db, fragment), []);
  } finally {
    await offline.close();
  }

  const failing = await setup();
  try {
    await failing.memory.save({ location: { channelId: CHANNEL }, content: PARAPHRASE, memoryType: 'fact', sourceIds: ['m0', 'm1'] });
    fake.setDefault({ status: 500 });
    await failing.runtime.deleteMessages(CHANNEL, ['m0']);
    await failing.runtime.privacySettled();
    assert.ok(fake.requests.some(isRestate), 'the model was asked');
    assert.deepEqual(await memories(failing), []);
    assert.equal(failing.events.find((event) => event.type === 'memory_rewrite_dropped')?.reason, 'model_failed');
  } finally {
    await failing.close();
  }
});

test('a rewrite cut short by shutdown deletes the memory: its old text is not kept for a later run', async () => {
  const harness = await setup();
  try {
    await harness.memory.save({ location: { channelId: CHANNEL }, content: PARAPHRASE, memoryType: 'fact', sourceIds: ['m0', 'm1'] });
    fake.setDefault((request) => (isRestate(request) ? { delayMs: 60_000, then: { text: RESTATED } } : { status: 500 }));
    await harness.runtime.deleteMessages(CHANNEL, ['m0']);
    assert.deepEqual((await memories(harness)).map((memory) => memory.content), [MEMORY_REWRITE_MARKER]);
    await harness.closeRuntime();
    assert.deepEqual(await memories(harness), []);
    assert.equal(harness.events.find((event) => event.type === 'memory_rewrite_dropped')?.reason, 'interrupted');
  } finally {
    await harness.close();
  }
});
