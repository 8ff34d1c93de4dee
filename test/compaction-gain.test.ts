/** A compaction frees what it says it frees, never a negative figure, and never lands a summary that frees too little. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SUMMARY_HEADER_TOKENS } from '../src/context/summary-text.js';
import { estimateTokens } from '../src/context/token-estimate.js';
import type { HistoryEntry } from '../src/context/types.js';
import { createExtractiveSummarizer, extractiveSummary } from '../src/compaction/extractive-summarizer.js';
import { LaggedScheduler } from '../src/compaction/scheduler.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import { assertConsistentHistory, fill, gate, openHarness, ScriptedSummarizer, settle, started, testConfig, userMessage } from './compaction-support.js';

for (const lag of [0, 20]) {
  test(`with workers ${lag} messages behind, no compaction reports negative tokens freed`, async () => {
    const harness = await openHarness({
      config: new LiveConfig(testConfig({ contextWindow: 3000 })),
      summarizer: createExtractiveSummarizer(),
      scheduler: new LaggedScheduler(lag),
    });
    for (let index = 0; index < 600; index += 1) {
      await harness.runtime.ingest(userMessage('c1', index, { words: 10 + ((index * 37) % 60) }));
    }
    await harness.runtime.flushCompactions();
    const completed = harness.ofType('compaction_completed');
    assert.ok(completed.length > 5, 'workers landed');
    const min = DEFAULTS.defaults.compaction.minTokensFreed;
    for (const [index, event] of completed.entries()) {
      if (event.replaced_marker) {
        // The truncation freed that room already; the summary gives some back, and says so. Its
        // roll-up may give back more than that: the two figures then add up as before and after.
        assert.ok(Number(event.tokens_added) >= 0);
        assert.ok(Number(event.tokens_freed) >= 0);
        assert.ok(Number(event.tokens_freed) === 0 || Number(event.tokens_added) === 0, 'freed or added, not both');
        assert.equal(Number(event.tokens_before) - Number(event.tokens_after), Number(event.tokens_freed) - Number(event.tokens_added));
      } else {
        // At least the minimum; the first summary also brings the summaries' header.
        const floor = index === 0 ? Math.max(0, min - SUMMARY_HEADER_TOKENS) : min;
        assert.ok(Number(event.tokens_freed) >= floor, `freed ${String(event.tokens_freed)}`);
      }
    }
    for (const event of harness.ofType('emergency_truncation')) assert.ok(Number(event.tokens_freed) >= 0);
    if (lag > 0) assert.ok(completed.some((event) => event.replaced_marker), 'some summaries landed on markers');
    // The extractive summarizer is sized to its room: it never fails on length.
    assert.deepEqual(harness.ofType('compaction_failed'), []);
    await assertConsistentHistory(harness.db, 'c1');
    await harness.close();
  });
}

test('tokens freed are the range less its summary, whatever arrived while the worker ran', async () => {
  const pending = gate('Ana and Ben settled the budget at 4,200 euros.');
  const harness = await openHarness({ summarizer: new ScriptedSummarizer().enqueue(pending.behaviour) });
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  for (let count = 0; count < 5; count += 1) await harness.runtime.ingest(userMessage('c1', next++));
  pending.open();
  await settle();
  const [event] = harness.ofType('compaction_completed');
  assert.ok(event);
  assert.equal(event.replaced_marker, false);
  // The first summary also brings the header that introduces summaries.
  assert.equal(event.tokens_freed, Number(event.range_tokens) - Number(event.summary_tokens) - SUMMARY_HEADER_TOKENS);
  assert.equal(event.tokens_freed, Number(event.tokens_before) - Number(event.tokens_after));
  await harness.close();
});

test('a summary that would free too little is not landed (no_gain); the extractive fallback lands next', async () => {
  const summarizer = new ScriptedSummarizer().enqueue(async (request) => {
    // Just shorter than the messages it stands for: it would free a few tokens only.
    let tokens = 0;
    for (const entry of request.entries) tokens += entry.tokens;
    return { summary: 'Long summary. '.repeat(Math.floor(((tokens - 12) * 4) / 14)), memoriesSaved: 0 };
  });
  const harness = await openHarness({ summarizer, fallbackSummarizer: createExtractiveSummarizer() });
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  const before = await harness.runtime.liveContext('c1');
  for (let round = 0; round < 20 && harness.ofType('compaction_failed').length === 0; round += 1) await settle();
  const failed = harness.ofType('compaction_failed');
  assert.equal(failed.length, 1);
  assert.equal(failed[0]!.reason, 'no_gain');
  assert.deepEqual((await harness.runtime.liveContext('c1')).summaries, before.summaries, 'nothing landed');
  // The next check starts a worker on the fallback at once, which frees room.
  next = await fill(harness, 'c1', next, () => harness.ofType('compaction_completed').length === 1);
  const [completed] = harness.ofType('compaction_completed');
  assert.equal(completed!.summarizer, 'extractive');
  assert.ok(Number(completed!.tokens_freed) >= 0);
  await harness.close();
});

test('the extractive summary stays within the room it is given, whatever the input', () => {
  const settings = DEFAULTS.defaults.compaction;
  let seed = 7;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  for (let round = 0; round < 300; round += 1) {
    const count = 1 + Math.floor(random() * 12);
    const entries: HistoryEntry[] = Array.from({ length: count }, (_, index) => {
      const words = 1 + Math.floor(random() * (random() < 0.2 ? 400 : 20));
      const content = Array.from({ length: words }, () => `w${Math.floor(random() * 50)}`).join(random() < 0.5 ? ' ' : '. ');
      return {
        seq: index + 1,
        channelId: 'c1',
        messageId: `m${index}`,
        kind: 'message',
        role: 'user',
        authorId: 'u1',
        authorName: 'Ana',
        content,
        createdAt: Date.UTC(2026, 0, 1) + index * 60_000,
        tokens: estimateTokens(content) + 6,
        turnId: index + 1,
      };
    });
    const room = 1 + Math.floor(random() * 80);
    const summary = extractiveSummary({ entries, priorSummaries: [], settings, maxSummaryTokens: room });
    assert.ok(summary.length > 0);
    assert.ok(estimateTokens(summary) <= room, `room ${room}, summary ${estimateTokens(summary)} tokens`);
  }
});
