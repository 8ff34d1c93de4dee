/**
 * A write that fails while a worker's result lands (or while an emergency truncation runs)
 * never ends the process and loses nothing. Faults are real SQLite errors, raised by triggers
 * on the tables the landing path writes.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ImmediateScheduler, LaggedScheduler, type WorkerHandle } from '../src/compaction/scheduler.js';
import { assertConsistentHistory, fill, gate, openHarness, ScriptedSummarizer, settle, started, userMessage, type Harness } from './compaction-support.js';
import { TEST_STORAGE } from './support/storage.js';

const escaped: unknown[] = [];
const record = (error: unknown) => escaped.push(error);
before(() => {
  process.on('unhandledRejection', record);
  process.on('uncaughtException', record);
});
after(() => {
  process.off('unhandledRejection', record);
  process.off('uncaughtException', record);
});

/** Each write of the landing path: the summary row, the marker row, the live start. */
const FAULTS = [
  { write: 'summary or marker insert', on: 'BEFORE INSERT ON history_summaries' },
  { write: 'summary retire, marker shrink or extend', on: 'BEFORE UPDATE ON history_summaries' },
  { write: 'live start insert', on: 'BEFORE INSERT ON history_channels' },
  { write: 'live start update', on: 'BEFORE UPDATE ON history_channels' },
];

async function shape(harness: Harness): Promise<{ summaries: unknown[]; entries: number[] }> {
  const live = await harness.runtime.liveContext('c1');
  return {
    summaries: live.summaries.map((summary) => [summary.kind, summary.fromSeq, summary.toSeq, summary.content]),
    entries: live.entries.map((entry) => entry.seq),
  };
}

for (const fault of FAULTS) {
  test(`a failing ${fault.write} while a result lands: the channel goes on and nothing is lost`, { skip: TEST_STORAGE !== 'sqlite' }, async () => {
    const pending = gate('Alice and Bob talked about words one to ten.');
    const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
    let harness = await openHarness({ summarizer });
    let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
    // Ensure the live-start row exists, so that both its insert and its update are exercised.
    await harness.db.exec(`CREATE TRIGGER injected_fault ${fault.on} BEGIN SELECT RAISE(ABORT, 'injected disk I/O error'); END`);

    const liveBefore = (await harness.runtime.liveContext('c1')).entries.length;
    next = await fill(harness, 'c1', next, () => harness.ofType('emergency_truncation').length === 1);
    assert.ok((await harness.runtime.liveContext('c1')).entries.length < liveBefore, 'the truncation took effect in memory');
    pending.open();
    await settle();
    await harness.runtime.flushCompactions();
    const landed = [...harness.ofType('compaction_completed'), ...harness.ofType('compaction_failed')];
    assert.ok(landed.some((event) => event.compaction_id === 'c1/1'), 'the worker result was landed or reported as failed');
    for (let count = 0; count < 15; count += 1) await harness.runtime.ingest(userMessage('c1', next++));
    assert.deepEqual(escaped, [], 'nothing escaped as an unhandled error');

    // The disk recovers: the next check writes what was owed.
    await harness.db.exec('DROP TRIGGER injected_fault');
    await harness.runtime.ingest(userMessage('c1', next++));
    await harness.runtime.flushCompactions();
    const before = await shape(harness);
    const { dir } = harness;
    await harness.close({ keepDir: true });

    harness = await openHarness({ dir, summarizer: new ScriptedSummarizer() });
    const counts = await assertConsistentHistory(harness.db, 'c1');
    assert.equal(counts.archived, next, 'every message is in the archive');
    assert.deepEqual(await shape(harness), before, 'a restart finds the same live context');
    assert.deepEqual(escaped, []);
    await harness.close();
  });
}

test('an emergency truncation whose write fails holds in memory and is written at a later check', { skip: TEST_STORAGE !== 'sqlite' }, async () => {
  const harness = await openHarness({ summarizer: new ScriptedSummarizer() });
  await harness.db.exec(`CREATE TRIGGER injected_fault BEFORE INSERT ON history_summaries BEGIN SELECT RAISE(ABORT, 'injected disk full'); END`);
  let next = await fill(harness, 'c1', 0, () => harness.ofType('emergency_truncation').length === 1);
  const truncation = harness.ofType('emergency_truncation')[0]!;
  assert.equal(truncation.saved, false);
  assert.ok((truncation.tokens_freed as number) > 0, 'room was freed all the same');
  assert.equal(harness.ofType('truncation_write_failed').length > 0, true);
  assert.equal((await harness.runtime.liveContext('c1')).summaries[0]!.kind, 'marker');
  await harness.db.exec('DROP TRIGGER injected_fault');
  await harness.runtime.ingest(userMessage('c1', next++));
  assert.equal(harness.ofType('truncation_write_saved').length, 1);
  const stored = await assertConsistentHistory(harness.db, 'c1');
  assert.equal(stored.summaries, (await harness.runtime.liveContext('c1')).summaries.length);
  assert.ok((await harness.runtime.liveContext('c1')).summaries.every((summary) => summary.id > 0), 'the marker has its real id');
  assert.deepEqual(escaped, []);
  await harness.close();
});

test('a landing that throws is contained by both schedulers', async () => {
  const failing = (channelId: string): WorkerHandle => ({
    channelId,
    compactionId: `${channelId}/1`,
    settled: Promise.resolve(),
    land: () => {
      throw new Error('landing exploded');
    },
  });
  const immediate = new ImmediateScheduler();
  immediate.submit(failing('a'));
  await immediate.drain();
  const lagged = new LaggedScheduler(0);
  lagged.submit(failing('b'));
  lagged.submit(failing('b'));
  await lagged.beforeMessage('b');
  await lagged.drain();
  await settle();
  assert.deepEqual(escaped, []);
});
