/** The pure parts: the Compactor's decision, turn-aligned cuts, the extractive summarizer, lines. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HistoryEntry } from '../src/context/types.js';
import { decide } from '../src/compaction/compactor.js';
import { extractiveSummary } from '../src/compaction/extractive-summarizer.js';
import { truncationCount, truncationCut } from '../src/compaction/emergency.js';
import { alignedCut, planCompaction } from '../src/compaction/planner.js';
import { LaggedScheduler } from '../src/compaction/scheduler.js';
import { parseTranscriptLine } from '../src/compaction/transcript-line.js';
import { DEFAULTS } from '../src/config/defaults.js';

const settings = DEFAULTS.defaults.compaction;

function entry(seq: number, turnId: number, kind: HistoryEntry['kind'] = 'message', content = `text ${seq}`): HistoryEntry {
  return {
    seq,
    channelId: 'c',
    messageId: `m${seq}`,
    kind,
    role: kind === 'tool_call' ? 'assistant' : 'user',
    authorId: 'u',
    authorName: seq % 2 ? 'Ann' : 'Ben',
    content,
    createdAt: Date.UTC(2026, 0, 1, 10, seq),
    tokens: 10,
    turnId,
  };
}

test('decide: tiers by threshold; a running worker holds back the worker tiers, not emergency', () => {
  assert.equal(decide(0.5, settings, { compactionRunning: false }), 'none');
  assert.equal(decide(0.8, settings, { compactionRunning: false }), 'background');
  assert.equal(decide(0.85, settings, { compactionRunning: false }), 'aggressive');
  assert.equal(decide(0.95, settings, { compactionRunning: false }), 'emergency');
  assert.equal(decide(0.9, settings, { compactionRunning: true }), 'none');
  assert.equal(decide(0.99, settings, { compactionRunning: true }), 'emergency');
});

test('alignedCut never separates a turn: tool call from result, message from a late reply', () => {
  // turn 1: message, tool call, tool result, reply; turn 2: one message; turn 3 and a message of
  // turn 4 arriving before turn 3's reply.
  const entries = [
    entry(1, 1), entry(2, 1, 'tool_call'), entry(3, 1, 'tool_result'), entry(4, 1),
    entry(5, 2),
    entry(6, 3), entry(7, 4), entry(8, 3),
    entry(9, 5),
  ];
  assert.equal(alignedCut(entries, 2), 4, 'no cut inside turn 1: the first boundary after it');
  assert.equal(alignedCut(entries, 5), 5);
  assert.equal(alignedCut(entries, 6), 5, 'turns 3 and 4 interleave: the cut goes before them');
  assert.equal(alignedCut(entries, 7), 5);
  assert.equal(alignedCut(entries, 8), 8);
  assert.equal(alignedCut([], 3), 0);
  const plan = planCompaction({ entries, summaries: [], summaryTokens: 0, fraction: 0.3, rollupTokens: 100 });
  assert.deepEqual(plan!.entries.map((item) => item.seq), [1, 2, 3, 4]);
  assert.equal(planCompaction({ entries: entries.slice(0, 4), summaries: [], summaryTokens: 0, fraction: 0.5, rollupTokens: 100 }), undefined,
    'never the whole live history');
});

test('extractive summary: deterministic, chronological, within budget, never empty', () => {
  const entries = [
    entry(1, 1, 'message', 'hi'),
    entry(2, 2, 'message', 'The deploy of release 2.4 moves to Friday 14:00 because Postgres needs an upgrade.'),
    entry(3, 3, 'message', 'ok ok'),
    entry(4, 4, 'message', 'Invoice 7731 for Acme was paid on March 3. Thanks!'),
    entry(5, 5, 'tool_call', '{"type":"tool_use"}'),
  ].map((item) => ({ ...item, tokens: 40 }));
  const request = { entries, priorSummaries: [], settings: { ...settings, summaryMaxTokens: 60 } };
  const summary = extractiveSummary(request);
  assert.equal(summary, extractiveSummary(request));
  const lines = summary.split('\n');
  assert.ok(lines.length >= 1);
  assert.ok(lines.some((line) => line.includes('Friday 14:00')), summary);
  assert.ok(lines.some((line) => line.includes('7731')), summary);
  assert.ok(!summary.includes('ok ok'));
  assert.match(lines[0]!, /^\[2026-01-01 10:0\d\] (Ann|Ben): /);
  assert.ok(lines.findIndex((line) => line.includes('Friday')) < lines.findIndex((line) => line.includes('7731')));
  assert.ok(summary.length / 4 <= 60);
  const tiny = extractiveSummary({ entries: [entry(1, 1, 'message', 'x'.repeat(2000))], priorSummaries: [], settings: { ...settings, summaryMaxTokens: 10 } });
  assert.ok(tiny.length > 0 && tiny.length < 200);
  const rolled = extractiveSummary({
    entries: entries.slice(0, 2),
    priorSummaries: [{ id: 1, channelId: 'c', kind: 'summary', fromSeq: 0, toSeq: 0, content: '[2025-12-31 09:00] Ann: Budget 5000 approved by Carla.', tokens: 20, createdAt: 0 }],
    settings,
  });
  assert.ok(rolled.startsWith('[2025-12-31 09:00] Ann: Budget 5000'), rolled);
});

test('transcript lines: clear errors naming line and field', () => {
  const ok = parseTranscriptLine('{"id":7,"channel":"c","author":"Ann","content":"hi","ts":"2024-01-02T03:04:05Z","role":"assistant"}', 1, 0);
  assert.equal(ok.messageId, '7');
  assert.equal(ok.role, 'assistant');
  assert.equal(ok.createdAt, Date.parse('2024-01-02T03:04:05Z'));
  assert.equal(parseTranscriptLine('{"id":"a","channel":"c","author":"Ann","content":""}', 2, 99).createdAt, 99);
  const cases: Array<[string, RegExp]> = [
    ['nope', /line 3: is not valid JSON/],
    ['[1]', /line 3: must be a JSON object/],
    ['{"channel":"c","author":"a","content":"x"}', /line 3: field "id"/],
    ['{"id":"1","author":"a","content":"x"}', /line 3: field "channel"/],
    ['{"id":"1","channel":"c","content":"x"}', /line 3: field "author"/],
    ['{"id":"1","channel":"c","author":"a","content":5}', /line 3: field "content"/],
    ['{"id":"1","channel":"c","author":"a","content":"x","ts":"yesterday"}', /line 3: field "ts"/],
    ['{"id":"1","channel":"c","author":"a","content":"x","role":"bot"}', /line 3: field "role"/],
  ];
  for (const [text, pattern] of cases) assert.throws(() => parseTranscriptLine(text, 3, 0), pattern);
});

test('emergency cut in a chain of overlapping turns: about half, held messages staying, not the far clean boundary', () => {
  // Each reply lands after the next question (m1 m2 r1 m3 r2 … m9 r8 r9), then two clean turns:
  // the only turn boundary short of the end is after r9, 18 of 22 entries in.
  const entries: HistoryEntry[] = [];
  let seq = 0;
  const add = (turnId: number) => entries.push({ ...entry(++seq, turnId), tokens: 50 });
  add(1);
  for (let turn = 2; turn <= 9; turn += 1) {
    add(turn);
    add(turn - 1);
  }
  add(9);
  add(10);
  add(10);
  add(11);
  add(11);
  assert.equal(alignedCut(entries, 11), 18, 'the clean boundary lies far past half');
  const cut = truncationCut(entries, 0.5, { markerTokens: () => 10, mustFree: 100 });
  assert.equal(cut.count, 11, 'the cut stays at half');
  // The entries before the cut whose turn goes on past it stay live, with their replies.
  const held = [...cut.held].map((held) => held.seq);
  assert.deepEqual(held, [10]);
  // When half through the turns cannot free what must be freed, the cut still goes as far as it must.
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 10, mustFree: 1e6 }), 22);
});

test('LaggedScheduler lands a result only after N more messages in its channel', async () => {
  const scheduler = new LaggedScheduler(2);
  const landed: string[] = [];
  scheduler.submit({ channelId: 'a', compactionId: 'a/1', settled: Promise.resolve(), land: () => void landed.push('a/1') });
  assert.equal(await scheduler.beforeMessage('a'), undefined);
  scheduler.afterMessage('a');
  scheduler.afterMessage('b');
  assert.equal(await scheduler.beforeMessage('a'), undefined);
  scheduler.afterMessage('a');
  await scheduler.beforeMessage('a');
  assert.deepEqual(landed, ['a/1']);
  scheduler.submit({ channelId: 'b', compactionId: 'b/1', settled: Promise.resolve(), land: () => void landed.push('b/1') });
  await scheduler.drain();
  assert.deepEqual(landed, ['a/1', 'b/1']);
});

test('emergency cut: extended turn by turn until what it drops outweighs its marker', () => {
  const small = (seq: number, turnId: number) => ({ ...entry(seq, turnId), tokens: 5 });
  // Half of six entries is three small ones (15 tokens) — less than a 30-token marker.
  const entries = [small(1, 1), small(2, 2), small(3, 3), { ...entry(4, 4), tokens: 5000 }, small(5, 4), small(6, 5)];
  assert.equal(truncationCount(entries, 0.5), 3, 'without a marker cost: half by count');
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 30 }), 5, 'the long message joins the cut, with the rest of its turn');
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 10 }), 3, 'a cut that already frees room is kept');
  assert.equal(truncationCount(entries.slice(0, 3), 0.5, { markerTokens: () => 1_000 }), 3, 'at most everything');
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 10, mustFree: 100 }), 5, 'extended until it frees what it must');
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 10, mustFree: 1e6 }), 6, 'everything when nothing less will do');
  // A turn is answering entry 3 (index 2): cuts stop before it while one of them frees room.
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 8, protectFrom: 2 }), 2, 'the message being answered stays');
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 8, mustFree: 1e6, protectFrom: 2 }), 2, 'even when short of mustFree');
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 30, protectFrom: 2 }), 0, 'and when nothing before it frees room, nothing is dropped');
});
