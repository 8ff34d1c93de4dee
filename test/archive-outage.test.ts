import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChannelRuntime, HistoryStore } from '../src/channel/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import type { Embedder } from '../src/memory/embedder.js';
import { HashingEmbedder } from '../src/memory/hashing-embedder.js';
import { openMemoryStore } from '../src/memory/open-memory-store.js';
import { never, ScriptedSummarizer, settle, tempDir, testConfig } from './compaction-support.js';
import { openTestDatabase } from './support/storage.js';

/** The local embedder, switched off and on like a remote one in an outage. */
class FlakyEmbedder implements Embedder {
  down = false;
  private readonly inner = new HashingEmbedder({ dimension: 64 });
  readonly name = this.inner.name;
  readonly dimension = this.inner.dimension;
  async embed(texts: string[]): Promise<Float32Array[]> {
    if (this.down) throw new Error('embedder unreachable: connect ECONNREFUSED');
    return this.inner.embed(texts);
  }
}

async function waitFor(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let attempt = 0; attempt < 2000 && !(await condition()); attempt += 1) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(await condition(), what);
}

test('an embedder outage during emergency truncation leaves every message findable, and repair runs in the background', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const embedder = new FlakyEmbedder();
  const events: MagpieEvent[] = [];
  const stream = new EventStream();
  stream.subscribe((event) => events.push(event));
  // Wired as the app wires it: the store reports owed vectors it cannot make on the same stream.
  const memory = await openMemoryStore({ db, dataDir: dir.path, settings: { ...DEFAULTS.memory, dataDir: dir.path }, embedder, events: stream });
  const summarizer = new ScriptedSummarizer();
  summarizer.fallback = never; // workers never land: only emergency truncation frees room
  const runtime = new ChannelRuntime({
    db,
    memory,
    config: new LiveConfig(testConfig({ contextWindow: 1500 })),
    events: stream,
    summarizer,
    archiveRepairIntervalMs: 20,
  });
  const location = { channelId: 'c1', guildId: 'g1' };
  try {
    embedder.down = true;
    const count = 120;
    for (let index = 0; index < count; index += 1) {
      await runtime.ingest({
        messageId: `m${index}`,
        channelId: 'c1',
        guildId: 'g1',
        authorId: 'u1',
        authorName: 'ana',
        role: 'user',
        content: `Note ${index}: the code word is kiwi${index}z and we keep talking about the plan.`,
        createdAt: Date.UTC(2026, 0, 1) + index * 1000,
      });
    }
    assert.ok(events.filter((event) => event.type === 'emergency_truncation').length > 0, 'truncation moved messages out of the context');
    // Reported by whichever path met the embedder: a transcript write, or (when transcript rows
    // are written with their history rows and vectors follow) the vector backlog.
    await waitFor(
      () => events.some((event) => event.type === 'archive_failed' || event.type === 'memory_vectors_delayed'),
      'the outage was reported',
    );
    const live = new Set((await runtime.liveContext('c1')).entries.map((entry) => entry.messageId));
    assert.ok(live.size < count);

    // Still down: every message, truncated or live, is found by its text.
    for (let index = 0; index < count; index += 1) {
      const hits = await memory.search({ location, query: `kiwi${index}z`, kind: 'transcript' });
      assert.ok(hits.some((hit) => hit.source_ids.includes(`m${index}`)), `m${index} (${live.has(`m${index}`) ? 'live' : 'truncated'}) findable during the outage`);
    }
    // The background repair confirms every transcript write without a restart.
    await waitFor(async () => (await new HistoryStore(db).unarchived('c1')).length === 0, 'every history row flagged archived');
    assert.ok((await memory.missingVectors()) > 0, 'vectors are still missing while the embedder is down');

    embedder.down = false;
    while ((await memory.backfillVectors()) > 0) await settle();
    assert.equal(await memory.missingVectors(), 0, 'every item has its vector once the embedder is back');
    const hits = await memory.search({ location, query: 'kiwi7z', kind: 'transcript' });
    assert.ok(hits.some((hit) => hit.source_ids.includes('m7')));
  } finally {
    await runtime.close();
    await memory.close();
    await db.close();
    dir.remove();
  }
});

test('the store embeds what it kept without a vector in the background once the embedder is back', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const embedder = new FlakyEmbedder();
  embedder.down = true;
  const first = await openMemoryStore({ db, dataDir: dir.path, settings: { ...DEFAULTS.memory, dataDir: dir.path }, embedder });
  await assert.rejects(
    first.archiveTranscript([{ messageId: 'x1', channelId: 'c9', authorId: 'u', authorName: 'bo', content: 'pineapple pizza debate', createdAt: 1 }]),
    /unreachable/,
  );
  // The text is stored all the same; a retry finds it and succeeds.
  await first.archiveTranscript([{ messageId: 'x1', channelId: 'c9', authorId: 'u', authorName: 'bo', content: 'pineapple pizza debate', createdAt: 1 }]);
  assert.equal(await first.missingVectors(), 1);
  await first.close();
  // After a restart with the embedder back, the backfill starts by itself.
  embedder.down = false;
  const second = await openMemoryStore({ db, dataDir: dir.path, settings: { ...DEFAULTS.memory, dataDir: dir.path }, embedder });
  assert.equal(await second.missingVectors(), 1);
  assert.equal(await second.backfillVectors(), 1);
  assert.equal(await second.missingVectors(), 0);
  await second.close();
  await db.close();
  dir.remove();
});
