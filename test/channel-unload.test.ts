/** Bounded memory: idle channels and those beyond the cap are unloaded and come back exactly as they were. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { MagpieConfig } from '../src/config/types.js';
import { checkConfigText } from '../src/config/index.js';
import { SqlMemoryStore } from '../src/memory/index.js';
import { tempDir, userMessage } from './compaction-support.js';
import { appEnv, withTestStorage } from './support/storage.js';

function config(dataDir: string, runtime: Partial<MagpieConfig['runtime']>): MagpieConfig {
  return {
    ...DEFAULTS,
    // A small window so that compaction (extractive: no model) writes summaries and markers.
    defaults: { ...DEFAULTS.defaults, contextWindow: 3_000, maxResponseTokens: 200, systemPrompt: 'Test bot.' },
    memory: { ...DEFAULTS.memory, dataDir },
    runtime: { ...DEFAULTS.runtime, ...runtime },
  };
}

async function open(runtime: Partial<MagpieConfig['runtime']>, clock?: { now(): number }) {
  const dir = tempDir();
  const events: MagpieEvent[] = [];
  const stream = new EventStream();
  stream.subscribe((event) => events.push(event));
  const app = await openApp({ config: withTestStorage(config(dir.path, runtime)), env: appEnv(), events: stream, ...(clock ? { clock } : {}) });
  return {
    app,
    events,
    async close() {
      await app.close();
      dir.remove();
    },
  };
}

/** The parts of a channel a reload must give back identically. */
async function snapshot(app: MagpieApp, channelId: string) {
  const { lastCompaction: _ignored, ...status } = await app.runtime.status(channelId);
  return { live: await app.runtime.liveContext(channelId), status };
}

async function fillChannel(app: MagpieApp, channelId: string, count: number, from = 0): Promise<void> {
  for (let index = from; index < from + count; index += 1) await app.runtime.ingest(userMessage(channelId, index, { words: 30 }));
  await app.runtime.flushCompactions();
  // A worker still running keeps its channel loaded (and would change it after the snapshot):
  // the channel is quiet only once every compaction has landed.
  await app.runtime.compactionsIdle();
}

test('a channel pushed out by max_loaded_channels comes back exactly as it was, and goes on from there', async () => {
  const bot = await open({ maxLoadedChannels: 2 });
  const { app } = bot;
  try {
    await fillChannel(app, 'a', 60);
    const before = await snapshot(app, 'a');
    assert.ok((await before.live).summaries.length > 0, 'compaction wrote summaries or markers before the unload');
    for (const other of ['b', 'c', 'd']) await fillChannel(app, other, 3);
    assert.ok(app.runtime.loadedChannels <= 2, `at most the cap stays loaded (got ${app.runtime.loadedChannels})`);
    assert.ok(
      bot.events.some((event) => event.type === 'channel_unloaded' && event.channel_id === 'a' && event.reason === 'cap'),
      'channel a was unloaded for the cap',
    );
    assert.deepEqual(await snapshot(app, 'a'), before, 'reloaded from SQLite exactly as it was');
    const next = await app.runtime.ingest(userMessage('a', 60, { words: 30 }));
    const lastBefore = (await before.live).entries.at(-1)!;
    assert.ok(next.seq > lastBefore.seq && next.turnId > lastBefore.turnId, 'sequence and turn numbers go on');
    const found = await app.memory.search({ location: { channelId: 'a', guildId: 'g1' }, query: 'Message 3', limit: 5 });
    assert.ok(found.length > 0, 'the unloaded channel is still searchable');
  } finally {
    await bot.close();
  }
});

test('channels unused for channel_idle_ms are unloaded with their vector index', async () => {
  let now = Date.UTC(2026, 0, 1);
  const clock = { now: () => now };
  const bot = await open({ channelIdleMs: 60_000 }, clock);
  const { app } = bot;
  try {
    await fillChannel(app, 'quiet', 5);
    await fillChannel(app, 'busy', 5);
    // A search loads the channel's vector index.
    await app.memory.search({ location: { channelId: 'quiet', guildId: 'g1' }, query: 'word7 word8', limit: 3 });
    const indexes = ((app.memory as SqlMemoryStore) as unknown as { context: { indexes: { loadedCount: number } } }).context.indexes;
    assert.equal(indexes.loadedCount, 1);
    now += 30_000;
    await app.runtime.ingest(userMessage('busy', 5));
    now += 40_000;
    assert.equal(app.runtime.unloadIdle(), 1, 'only the channel idle for over a minute');
    assert.equal(app.runtime.loadedChannels, 1);
    assert.equal(indexes.loadedCount, 0, 'its vector index went with it');
    const reloaded = await app.runtime.liveContext('quiet');
    assert.equal(reloaded.entries.length, 5);
  } finally {
    await bot.close();
  }
});

test('a channel with a turn in flight is never unloaded, even over the cap', async () => {
  const bot = await open({ maxLoadedChannels: 1 });
  const { app } = bot;
  try {
    await app.runtime.ingest(userMessage('busy', 0));
    let release!: () => void;
    const turn = app.runtime.runSerial('busy', () => new Promise<void>((resolve) => (release = resolve)));
    await app.runtime.ingest(userMessage('other', 0));
    await app.runtime.ingest(userMessage('third', 0));
    assert.ok(!bot.events.some((event) => event.type === 'channel_unloaded' && event.channel_id === 'busy'));
    release();
    await turn;
    // The serial queue forgets an idle channel one callback after its last task.
    await new Promise((resolve) => setImmediate(resolve));
    await app.runtime.ingest(userMessage('fourth', 0));
    assert.ok(bot.events.some((event) => event.type === 'channel_unloaded' && event.channel_id === 'busy'), 'unloaded once quiet');
  } finally {
    await bot.close();
  }
});

test('[runtime] keys refuse garbage with an error naming the key', () => {
  for (const [text, key] of [
    ['[runtime]\nmax_loaded_channels = 0\n', 'runtime.max_loaded_channels'],
    ['[runtime]\nmax_loaded_channels = "many"\n', 'runtime.max_loaded_channels'],
    ['[runtime]\nchannel_idle_ms = -5\n', 'runtime.channel_idle_ms'],
    ['[runtime]\nchannel_idle_ms = 1.5\n', 'runtime.channel_idle_ms'],
    ['[runtime]\nchanel_idle_ms = 1000\n', 'runtime.chanel_idle_ms'],
  ] as const) {
    const result = checkConfigText(text);
    assert.equal(result.ok, false, text);
    if (!result.ok) assert.ok(result.problems.some((problem) => problem.path === key), `${text}: ${JSON.stringify(result.problems)}`);
  }
  const good = checkConfigText('[runtime]\nchannel_idle_ms = 5000\nmax_loaded_channels = 10\n');
  assert.equal(good.ok, true);
  if (good.ok) assert.deepEqual(good.config.runtime, { channelIdleMs: 5000, maxLoadedChannels: 10 });
});
