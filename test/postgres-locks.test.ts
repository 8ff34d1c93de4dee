/** Cross-process exclusion on PostgreSQL: compaction locks and their release. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelRuntime } from '../src/channel/index.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { LiveConfig } from '../src/config/live-config.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import type { ChannelLocks } from '../src/storage/channel-locks.js';
import { openStorageForWriting, type OpenedStorage } from '../src/storage/open-storage.js';
import { FakeMemoryStore, testConfig, TickingClock, userMessage } from './compaction-support.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';

function openSchema(schema: string, writerKey: string): Promise<OpenedStorage> {
  return openStorageForWriting({ backend: 'postgres', dataDir: '/nonexistent', url: TEST_DATABASE_URL, schema }, ALL_MIGRATIONS, {
    command: 'postgres-locks test',
    writerKey,
  });
}

test('a channel compaction lock is held by one connection at a time and freed when its holder goes', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema();
  const first = await openSchema(schema, 'one');
  const second = await openSchema(schema, 'two');
  try {
    const mine = first.channelLocks!;
    const theirs = second.channelLocks!;
    assert.equal(await mine.tryAcquire('c1'), true);
    assert.equal(await mine.tryAcquire('c1'), true, 'the holder may ask again');
    assert.equal(await theirs.tryAcquire('c1'), false, 'another process is refused');
    assert.equal(await theirs.tryAcquire('c2'), true, 'other channels are free');
    await mine.release('c1');
    assert.equal(await theirs.tryAcquire('c1'), true, 'released once, even after being asked twice');
    await theirs.release('c1');
    assert.equal(await mine.tryAcquire('c1'), true);
    await first.close();
    assert.equal(await theirs.tryAcquire('c1'), true, 'a closed connection (a dead process) leaves no lock behind');
  } finally {
    if (first.db.open) await first.close();
    await second.db.exec(`DROP SCHEMA "${schema}" CASCADE`);
    await second.close();
  }
});

test('a runtime does not compact a channel another process is compacting, and does once it is free', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema();
  const storage = await openSchema(schema, 'runtime');
  const other = await openSchema(schema, 'other');
  const events: MagpieEvent[] = [];
  const stream = new EventStream();
  stream.subscribe((event) => events.push(event));
  // Once the lock is free its answer comes late, as from a busy server: flushing compactions
  // still waits for a start that is asking for it, and for the compaction it then runs.
  const locks = storage.channelLocks!;
  let answerAfterMs = 0;
  const slowLocks: ChannelLocks = {
    tryAcquire: async (channelId) => {
      await new Promise((resolve) => setTimeout(resolve, answerAfterMs));
      return locks.tryAcquire(channelId);
    },
    release: (channelId) => locks.release(channelId),
  };
  const runtime = new ChannelRuntime({
    db: storage.db,
    locks: slowLocks,
    memory: new FakeMemoryStore(),
    config: new LiveConfig(testConfig({ contextWindow: 2000, compaction: { emergencyThreshold: 0.99 } })),
    events: stream,
    summarizer: createExtractiveSummarizer(),
    clock: new TickingClock(),
  });
  const elsewhere = other.channelLocks!;
  try {
    assert.equal(await elsewhere.tryAcquire('busy'), true);
    let index = 0;
    while (!events.some((event) => event.type === 'compaction_skipped') && index < 200) {
      await runtime.ingest(userMessage('busy', index, { words: 20 }));
      index += 1;
    }
    await runtime.flushCompactions();
    assert.ok(events.some((event) => event.type === 'compaction_skipped' && event.channel_id === 'busy'), 'the locked channel was skipped');
    assert.equal(events.filter((event) => event.type === 'compaction_started').length, 0, 'no compaction started while locked');
    await elsewhere.release('busy');
    answerAfterMs = 150;
    await runtime.ingest(userMessage('busy', index, { words: 20 }));
    await runtime.flushCompactions();
    assert.ok(events.some((event) => event.type === 'compaction_completed' && event.channel_id === 'busy'), `compacted once the lock was free: ${events.slice(-6).map((event) => JSON.stringify(event)).join('\n')}`);
    const summaries = (await storage.db.prepare('SELECT count(*) AS n FROM history_summaries WHERE channel_id = ?').get('busy')) as { n: number };
    assert.ok(summaries.n >= 1);
  } finally {
    await runtime.close();
    await storage.close();
    await other.db.exec(`DROP SCHEMA "${schema}" CASCADE`);
    await other.close();
  }
});
