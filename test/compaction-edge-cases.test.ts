/** Edge cases of compaction: stale snapshots, stacked emergencies, restarts, odd transcript times. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HistoryStore } from '../src/channel/history-store.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { LaggedScheduler } from '../src/compaction/scheduler.js';
import { parseTranscriptLine } from '../src/compaction/transcript-line.js';
import { LiveConfig } from '../src/config/live-config.js';
import {
  assertConsistentHistory,
  gate,
  openHarness,
  ScriptedSummarizer,
  tempDir,
  testConfig,
  userMessage,
  fill,
  started,
} from './compaction-support.js';
import { waitUntil } from './support/wait-until.js';


test('a message edited inside a running worker snapshot makes it re-plan instead of splicing stale text', async () => {
  const pending = gate('Stale summary of the old text.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  await fill(harness, 'c1', 0, () => started(harness) === 1);
  const victim = summarizer.requests[0]!.entries[0]!.messageId;
  await runtime.editMessage('c1', victim, 'the corrected text');
  const before = await runtime.liveContext('c1');
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_replanned').length, 1);
  assert.deepEqual(await runtime.liveContext('c1'), before);
  assert.equal((await runtime.liveContext('c1')).entries[0]!.content, 'the corrected text');
  await harness.close();
});

test('two emergencies while a worker runs keep separate markers; the worker still lands on the first', async () => {
  const pending = gate('What the oldest messages said.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  next = await fill(harness, 'c1', next, () => harness.ofType('emergency_truncation').length === 2);
  assert.ok(harness.ofType('emergency_truncation').every((event) => event.merged_into_marker === false));
  assert.equal((await runtime.liveContext('c1')).summaries.length, 2);
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_completed').length, 1);
  assert.equal(harness.ofType('compaction_completed')[0]!.replaced_marker, true);
  await assertConsistentHistory(harness.db, 'c1');
  const ranges = (await runtime.liveContext('c1')).summaries.map((summary) => `${summary.kind}:${summary.fromSeq}-${summary.toSeq}`);
  const snapshot = summarizer.requests[0]!.entries;
  assert.equal(ranges[0], `summary:${snapshot[0]!.seq}-${snapshot.at(-1)!.seq}`);
  assert.equal(ranges.length, 3, 'the first marker shrank, the second is untouched');
  // More traffic after the landing: whichever tier acts next (a third emergency, or background
  // workers that keep up while each write waits on the database), the ranges stay consistent.
  const compactions = () => harness.ofType('emergency_truncation').length + harness.ofType('compaction_completed').length;
  await fill(harness, 'c1', next, () => compactions() >= 4);
  await harness.runtime.compactionsIdle();
  await assertConsistentHistory(harness.db, 'c1');
  await harness.close();
});

test('a restart right after an emergency that pre-empted a worker: same context, the worker is not applied', async () => {
  const dir = tempDir().path;
  const summarizer = new ScriptedSummarizer();
  summarizer.fallback = () => new Promise(() => {});
  const first = await openHarness({ dir, summarizer });
  await fill(first, 'c1', 0, () => first.ofType('emergency_truncation').length === 1);
  const before = await first.runtime.liveContext('c1');
  await first.close({ keepDir: true });
  const second = await openHarness({ dir, summarizer: createExtractiveSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), before);
  await assertConsistentHistory(second.db, 'c1');
  // Back to normal: compaction resumes and the history stays consistent.
  for (let index = 500; index < 560; index += 1) await second.runtime.ingest(userMessage('c1', index));
  await second.runtime.flushCompactions();
  await assertConsistentHistory(second.db, 'c1');
  await second.close();
});

test('a roll-up that folds a marker keeps the hint and the ranges stay consistent across a restart', async () => {
  const dir = tempDir().path;
  const configValue = testConfig({ contextWindow: 3000, compaction: { rollupThreshold: 0.02 } });
  const first = await openHarness({ dir, configValue, summarizer: createExtractiveSummarizer(), scheduler: new LaggedScheduler(30) });
  for (let index = 0; index < 300; index += 1) await first.runtime.ingest(userMessage('c1', index));
  await first.runtime.flushCompactions();
  const folded = first.ofType('compaction_completed').filter((event) => Number(event.summaries_folded) > 0);
  assert.ok(folded.length > 0, 'a roll-up happened');
  assert.ok(first.ofType('emergency_truncation').length > 0, 'markers were made');
  await assertConsistentHistory(first.db, 'c1');
  const before = await first.runtime.liveContext('c1');
  await first.close({ keepDir: true });
  const second = await openHarness({ dir, configValue, summarizer: createExtractiveSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), before);
  await second.close();
});

test('a worker landing after hot reload shrank the window still lands, then one emergency gets under the new window', async () => {
  const pending = gate('Short.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  summarizer.fallback = () => new Promise(() => {});
  const config = new LiveConfig(testConfig());
  const harness = await openHarness({ summarizer, config });
  const { runtime } = harness;
  const next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  const current = config.current();
  config.replace({ ...current, defaults: { ...current.defaults, contextWindow: 600 } });
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_completed').length, 1);
  // Landing found the context over the new window's threshold and truncated at once.
  assert.equal(harness.ofType('emergency_truncation').length, 1);
  assert.ok((await runtime.status('c1')).usage < 0.95, 'one emergency brought usage under the threshold of the new window');
  await runtime.ingest(userMessage('c1', next));
  assert.ok((await runtime.status('c1')).usage < 0.95);
  await assertConsistentHistory(harness.db, 'c1');
  await harness.close();
});

test('compactNow racing an automatic compaction: one worker, the other is told busy', async () => {
  const pending = gate('Auto.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  await fill(harness, 'c1', 0, () => started(harness) === 1);
  const outcome = await runtime.compactNow('c1');
  assert.equal(outcome.status, 'busy');
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(started(harness), 1);
  assert.equal(harness.ofType('compaction_completed').length, 1);
  await harness.close();
});

test('transcript times the clock cannot represent are refused with the line named', () => {
  for (const ts of [1e17, -1e17, 8.64e15 + 1]) {
    assert.throws(
      () => parseTranscriptLine(JSON.stringify({ id: 'a', channel: 'c', author: 'Ann', content: 'x', ts }), 4, 0),
      /line 4: field "ts"/,
    );
  }
  assert.equal(parseTranscriptLine(JSON.stringify({ id: 'a', channel: 'c', author: 'Ann', content: 'x', ts: 8.64e15 }), 1, 0).createdAt, 8.64e15);
});

test('the extractive summary does not fail on an entry whose time is out of range', async () => {
  const summarizer = createExtractiveSummarizer();
  const settings = testConfig().defaults.compaction;
  const entry = { seq: 1, channelId: 'c', messageId: 'm', kind: 'message' as const, role: 'user' as const, authorId: 'a', authorName: 'Ann', content: 'Budget is 5000 for Paris.', createdAt: 1e17, tokens: 10, turnId: 1 };
  const result = await summarizer.summarize({ channelId: 'c', location: { channelId: 'c' }, priorSummaries: [], entries: [entry], settings, signal: new AbortController().signal });
  assert.match(result.summary, /Budget is 5000/);
});

void HistoryStore;

test('a summary landing in place of a marker never leaves the context over the emergency threshold', async () => {
  let release!: () => void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  const summarizer = new ScriptedSummarizer().enqueue(async (request) => {
    await opened;
    // As long as the summarizer may make it: the room it is given, to the token.
    return { summary: 'Long summary. '.repeat(Math.floor((request.maxSummaryTokens! * 4) / 14)), memoriesSaved: 0 };
  });
  summarizer.fallback = () => new Promise(() => {});
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  next = await fill(harness, 'c1', next, () => harness.ofType('emergency_truncation').length === 1);
  // The channel fills up again, to just under the emergency threshold, while the worker runs.
  while ((await runtime.status('c1')).usage < 0.9) await runtime.ingest(userMessage('c1', next++));
  assert.equal(harness.ofType('emergency_truncation').length, 1);
  release();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_completed').length, 1);
  assert.equal(harness.ofType('compaction_completed')[0]!.replaced_marker, true);
  assert.ok((await runtime.status('c1')).usage < 0.95, `usage after landing: ${(await runtime.status('c1')).usage}`);
  await assertConsistentHistory(harness.db, 'c1');
  await harness.close();
});

test('summaries that alone overflow a window shrunk on reload are rolled up instead of truncating every message forever', async () => {
  const dir = tempDir().path;
  const config = new LiveConfig(testConfig({ contextWindow: 4000 }));
  const harness = await openHarness({ dir, config, summarizer: createExtractiveSummarizer(), scheduler: new LaggedScheduler(0) });
  const { runtime } = harness;
  let next = 0;
  for (; next < 150; next += 1) await runtime.ingest(userMessage('c1', next));
  await runtime.flushCompactions();
  const summaryTokens = (await runtime.liveContext('c1')).summaries.reduce((sum, summary) => sum + summary.tokens, 0);
  assert.ok(summaryTokens > 0);
  const current = config.current();
  config.replace({ ...current, defaults: { ...current.defaults, contextWindow: summaryTokens } });
  const usages: number[] = [];
  for (let count = 0; count < 6; count += 1) {
    await runtime.ingest(userMessage('c1', next++));
    usages.push((await runtime.status('c1')).usage);
  }
  assert.ok(harness.ofType('compaction_completed').some((event) => Number(event.summaries_folded) > 0 && event.messages_compacted === 0), 'a roll-up of the summaries alone landed');
  assert.ok(usages.slice(1).every((usage) => usage < 0.95), `usage after the roll-up: ${usages.join(', ')}`);
  assert.equal((await runtime.liveContext('c1')).entries.at(-1)!.messageId, `m${next - 1}`, 'the newest message is live again');
  await runtime.flushCompactions();
  await assertConsistentHistory(harness.db, 'c1');
  const before = await runtime.liveContext('c1');
  await harness.close({ keepDir: true });
  const second = await openHarness({ dir, config, summarizer: createExtractiveSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), before);
  await second.close();
});

test('a roll-up of summaries alone that lands after newer truncations leaves the live start alone', async () => {
  const dir = tempDir().path;
  const config = new LiveConfig(testConfig({ contextWindow: 4000 }));
  const first = await openHarness({ dir, config, summarizer: createExtractiveSummarizer(), scheduler: new LaggedScheduler(3) });
  let next = 0;
  for (; next < 150; next += 1) await first.runtime.ingest(userMessage('c1', next));
  await first.runtime.flushCompactions();
  const summaryTokens = (await first.runtime.liveContext('c1')).summaries.reduce((sum, summary) => sum + summary.tokens, 0);
  const current = config.current();
  config.replace({ ...current, defaults: { ...current.defaults, contextWindow: summaryTokens } });
  // The roll-up is held for 3 messages, each of which is truncated meanwhile; it lands before the 5th.
  for (let count = 0; count < 5; count += 1) await first.runtime.ingest(userMessage('c1', next++));
  assert.ok(first.ofType('compaction_completed').some((event) => event.messages_compacted === 0), 'the roll-up landed');
  await first.runtime.flushCompactions();
  await assertConsistentHistory(first.db, 'c1');
  const before = await first.runtime.liveContext('c1');
  await first.close({ keepDir: true });
  const second = await openHarness({ dir, config, summarizer: createExtractiveSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), before, 'a restart brings back the same context');
  await second.close();
});

test('an emergency during a turn leaves the message being answered live, so its reply lands next to it', async () => {
  const summarizer = new ScriptedSummarizer();
  summarizer.fallback = () => new Promise(() => {});
  const harness = await openHarness({ summarizer, configValue: testConfig({ compaction: { backgroundThreshold: 0.9, aggressiveThreshold: 0.93 } }) });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, async () => (await runtime.status('c1')).usage > 0.3);
  const question = await runtime.ingest(userMessage('c1', next++));
  await runtime.runSerial('c1', async () => {
    // A busy channel: others talk while the model thinks, until an emergency truncation.
    next = await fill(harness, 'c1', next, () => harness.ofType('emergency_truncation').length === 1);
    assert.ok((await runtime.liveContext('c1')).entries.some((entry) => entry.seq === question.seq), 'the question is still live');
    await runtime.appendToTurn('c1', [{ kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'Answer.' }], question.turnId);
  });
  const live = (await runtime.liveContext('c1')).entries;
  const turn = live.filter((entry) => entry.turnId === question.turnId).map((entry) => entry.kind + ':' + entry.role);
  assert.deepEqual(turn, ['message:user', 'message:assistant'], 'question and reply on the same side of every cut');
  await assertConsistentHistory(harness.db, 'c1');
  await harness.close();
});

test('messages whose archive write failed are not compacted until they are searchable', async () => {
  const pending = gate('Older talk.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  summarizer.fallback = () => new Promise(() => {});
  const harness = await openHarness({ summarizer });
  const { runtime, memory } = harness;
  memory.failArchives = true;
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  const before = await runtime.liveContext('c1');
  await waitUntil(() => harness.ofType('compaction_failed').length === 1, 'the archive failure', 20_000);
  const failed = harness.ofType('compaction_failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0]!.reason, 'archive_failed');
  assert.equal(summarizer.requests.length, 0, 'the summarizer never read unsearchable messages');
  assert.deepEqual(await runtime.liveContext('c1'), before, 'history unchanged');
  // The embedder is back: the next worker sends the failed writes again, then compacts.
  memory.failArchives = false;
  await runtime.ingest(userMessage('c1', next++));
  await waitUntil(() => summarizer.requests.length === 1, 'the next worker to read', 20_000);
  assert.equal(summarizer.requests.length, 1);
  for (const entry of summarizer.requests[0]!.entries) assert.ok(memory.transcript.has(`c1|${entry.messageId}`), entry.messageId);
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_completed').length, 1);
  await harness.close();
});
