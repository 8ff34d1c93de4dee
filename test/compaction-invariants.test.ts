/** One test (or more) per DESIGN.md invariant 1-8, against a real SQLite file. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HistoryStore } from '../src/channel/history-store.js';
import type { HistoryEntry } from '../src/context/types.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { LaggedScheduler } from '../src/compaction/scheduler.js';
import {
  failWith,
  gate,
  never,
  openHarness,
  replyWith,
  ScriptedSummarizer,
  settle,
  tempDir,
  testConfig,
  userMessage,
  fill,
  started,
  channelTurns,
  type Harness,
} from './compaction-support.js';
import { waitUntil } from './support/wait-until.js';
import { LiveConfig } from '../src/config/live-config.js';



test('1. the channel never blocks: a turn completes while a worker hangs', async () => {
  const summarizer = new ScriptedSummarizer().enqueue(never);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  const next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  assert.equal((await runtime.status('c1')).compactionRunning, true);
  const reply = await runtime.runSerial('c1', async () => {
    const request = await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 });
    assert.ok(request.messages.length > 0);
    const message = await runtime.ingest(userMessage('c1', next));
    return runtime.appendToTurn('c1', [{ kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'ok' }], message.turnId);
  });
  assert.equal(reply.length, 1);
  assert.equal((await runtime.status('c1')).compactionRunning, true, 'the worker is still pending');
  await harness.close();
});

test('2. one compaction per channel at a time; emergency pre-empts and the worker lands on the marker', async () => {
  const pending = gate('Alice and Bob discussed words 1 to 10.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  const snapshot = summarizer.requests[0]!.entries.map((entry) => entry.seq);
  next = await fill(harness, 'c1', next, () => harness.ofType('emergency_truncation').length === 1);
  assert.equal(started(harness), 1, 'aggressive and background waited for the running worker');
  const triggered = harness.ofType('compaction_triggered').map((event) => event.action);
  assert.ok(triggered.includes('emergency'));
  assert.equal(harness.ofType('emergency_truncation')[0]!.preempted_worker, true);
  assert.equal((await runtime.status('c1')).compactionRunning, true);

  pending.open();
  await harness.runtime.compactionsIdle();
  const completed = harness.ofType('compaction_completed');
  assert.equal(completed.length, 1);
  assert.equal(completed[0]!.replaced_marker, true);
  const { summaries } = await runtime.liveContext('c1');
  assert.equal(summaries[0]!.kind, 'summary');
  assert.deepEqual([summaries[0]!.fromSeq, summaries[0]!.toSeq], [snapshot[0], snapshot[snapshot.length - 1]]);
  assert.equal(summaries[1]!.kind, 'marker', 'the marker shrank to what the summary did not cover');
  assert.equal(summaries[1]!.fromSeq, snapshot[snapshot.length - 1]! + 1);
  assert.match(summaries[1]!.content, /truncated; recall them with memory_search/);
  assert.equal((await runtime.status('c1')).compactionRunning, false);
  await harness.close();
});

test('3. atomic splice: messages that arrive meanwhile stay after the summary, in order', async () => {
  const pending = gate('Summary of the oldest messages.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  for (let count = 0; count < 3; count += 1) await runtime.ingest(userMessage('c1', next++));
  const before = (await runtime.liveContext('c1')).entries;
  const taken = summarizer.requests[0]!.entries.length;
  pending.open();
  await harness.runtime.compactionsIdle();
  const after = await runtime.liveContext('c1');
  assert.deepEqual(after.entries, before.slice(taken));
  assert.equal(after.summaries.length, 1);
  assert.equal(after.summaries[0]!.toSeq + 1, after.entries[0]!.seq);
  const store = new HistoryStore(harness.db);
  assert.deepEqual((await store.load('c1')).entries, after.entries, 'the database agrees with memory');
  await harness.close();
});

test('3. re-plan: a message deleted inside the snapshot means nothing is spliced or dropped', async () => {
  const pending = gate('Stale summary.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer });
  const { runtime } = harness;
  await fill(harness, 'c1', 0, () => started(harness) === 1);
  const victim = summarizer.requests[0]!.entries[1]!.messageId;
  await runtime.deleteMessages('c1', [victim]);
  const before = await runtime.liveContext('c1');
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_replanned').length, 1);
  assert.equal(harness.ofType('compaction_replanned')[0]!.reason, 'range_changed');
  assert.deepEqual(await runtime.liveContext('c1'), before);
  assert.equal((await runtime.status('c1')).compactionRunning, false, 'lock released');
  await harness.close();
});

test('4. cuts fall on turn boundaries: tool calls stay with results, replies with messages', async () => {
  const harness = await openHarness({
    summarizer: createExtractiveSummarizer(),
    scheduler: new LaggedScheduler(0),
    configValue: testConfig({ contextWindow: 3000 }),
  });
  const { runtime } = harness;
  for (let index = 0; index < 150; index += 1) {
    const message = await runtime.ingest(userMessage('c1', index));
    if (index % 3 === 0) {
      await runtime.runSerial('c1', async () => {
        await runtime.appendToTurn(
          'c1',
          [
            { kind: 'tool_call', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_use', id: `t${index}`, name: 'memory_search', input: { query: 'x' } }) },
            { kind: 'tool_result', role: 'user', authorId: 'bot', authorName: 'Magpie', content: JSON.stringify({ type: 'tool_result', tool_use_id: `t${index}`, content: '[]' }) },
            { kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: `Reply ${index}` },
          ],
          message.turnId,
        );
      });
    }
  }
  await runtime.flushCompactions();
  assert.ok(harness.ofType('compaction_completed').length + harness.ofType('emergency_truncation').length >= 3);
  const archive = await new HistoryStore(harness.db).archive('c1');
  const live = new Set((await runtime.liveContext('c1')).entries.map((entry) => entry.seq));
  const turnsLive = new Map<number, Set<boolean>>();
  for (const entry of archive) {
    const sides = turnsLive.get(entry.turnId) ?? new Set<boolean>();
    sides.add(live.has(entry.seq));
    turnsLive.set(entry.turnId, sides);
  }
  for (const [turnId, sides] of turnsLive) assert.equal(sides.size, 1, `turn ${turnId} split across a cut`);
  const first = (await runtime.liveContext('c1')).entries[0]!;
  assert.notEqual(first.kind, 'tool_result');
  const request = await runtime.buildModelRequest('c1', { tools: [], maxTokens: 64 });
  assert.equal(request.messages[0]!.role, 'user');
  await harness.close();
});

test('5. nothing is lost: archive and transcript hold every message after compactions and truncations', async () => {
  const summarizer = new ScriptedSummarizer().enqueue(never);
  const harness = await openHarness({ summarizer });
  harness.memory.holdArchives = true;
  // Each message is in the context (its history row written) a turn of the event loop after it
  // came in; only the transcript write is held back.
  const ingested: Promise<unknown>[] = [];
  for (let index = 0; started(harness) === 0 && index < 200; index += 1) {
    ingested.push(harness.runtime.ingest(userMessage('c1', index)));
    const id = `m${index}`;
    await waitUntil(async () => started(harness) > 0 || (await harness.runtime.liveContext('c1')).entries.some((entry) => entry.messageId === id), `${id} in the context`, 20_000);
  }
  assert.equal(started(harness), 1);
  await settle();
  // The worker must not read (let alone splice) messages the archive has not confirmed.
  assert.equal(summarizer.requests.length, 0);
  harness.memory.releaseArchives();
  await Promise.all(ingested);
  await waitUntil(() => summarizer.requests.length === 1, 'the worker to read the archived messages', 20_000);
  assert.equal(summarizer.requests.length, 1);
  await harness.close();

  const second = await openHarness({ summarizer: createExtractiveSummarizer(), scheduler: new LaggedScheduler(8) });
  const { runtime } = second;
  for (let index = 0; index < 300; index += 1) await runtime.ingest(userMessage('c2', index, { words: 10 + (index % 30) }));
  await runtime.flushCompactions();
  assert.ok(second.ofType('compaction_completed').length > 0);
  assert.ok(second.ofType('emergency_truncation').length > 0);
  const ids = (await new HistoryStore(second.db).archive('c2')).map((entry) => entry.messageId);
  const expected = Array.from({ length: 300 }, (_, index) => `m${index}`);
  assert.deepEqual(ids, expected);
  assert.deepEqual(second.memory.idsFor('c2').sort(), [...expected].sort());
  await second.close();
});

test('6. failure is safe: throw, timeout and empty summary leave history unchanged; then the fallback', async () => {
  const summarizer = new ScriptedSummarizer().enqueue(failWith('HTTP 500'), never, replyWith('   '));
  const harness = await openHarness({
    summarizer,
    // Long enough for a worker's own reads on a busy PostgreSQL (30 ms was not, so the first
    // attempt timed out before it asked the summarizer), short enough for the one that hangs.
    configValue: testConfig({ compaction: { workerTimeoutMs: 1_000, fallbackAfterFailures: 3, emergencyThreshold: 1 } }),
  });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, () => started(harness) === 1);
  const reasons: string[] = [];
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const before = await runtime.liveContext('c1');
    await waitUntil(() => harness.ofType('compaction_failed').length > attempt, `compaction failure ${attempt + 1}`, 20_000);
    reasons.push(String(harness.ofType('compaction_failed')[attempt]!.reason));
    assert.deepEqual(await runtime.liveContext('c1'), before, 'history unchanged');
    assert.equal((await runtime.status('c1')).compactionRunning, false, 'lock released');
    await runtime.ingest(userMessage('c1', next++));
  }
  assert.deepEqual(reasons, ['summarizer_error: HTTP 500', 'timeout', 'empty_summary']);
  await waitUntil(() => harness.ofType('compaction_completed').length === 1, 'the fallback summary to land', 20_000);
  const completed = harness.ofType('compaction_completed');
  assert.equal(completed.length, 1);
  assert.equal(completed[0]!.summarizer, 'extractive', 'the fallback stood in after 3 failures');
  assert.equal(summarizer.requests.length, 3);
  await harness.close();
});

test('6. emergency truncation succeeds even when every summarizer fails', async () => {
  const summarizer = new ScriptedSummarizer();
  const harness = await openHarness({ summarizer, fallbackSummarizer: summarizer });
  await fill(harness, 'c1', 0, () => harness.ofType('emergency_truncation').length >= 2);
  assert.ok((await harness.runtime.status('c1')).usage < 0.95);
  await harness.close();
});

test('7. summaries stack in order, then roll up; summaries are never indexed as transcript', async () => {
  const harness = await openHarness({
    summarizer: createExtractiveSummarizer(),
    scheduler: new LaggedScheduler(0),
    configValue: testConfig({ contextWindow: 4000, compaction: { rollupThreshold: 0.08 } }),
  });
  const { runtime } = harness;
  let stacked = 0;
  for (let index = 0; index < 400; index += 1) {
    await runtime.ingest(userMessage('c1', index));
    const { summaries } = await runtime.liveContext('c1');
    stacked = Math.max(stacked, summaries.length);
    for (let at = 1; at < summaries.length; at += 1) assert.ok(summaries[at - 1]!.toSeq < summaries[at]!.fromSeq);
  }
  assert.ok(stacked >= 2, 'summaries stacked');
  const folded = harness.ofType('compaction_completed').filter((event) => Number(event.summaries_folded) > 0);
  assert.ok(folded.length >= 1, 'a meta-summary rolled them up');
  const archived = new Set((await new HistoryStore(harness.db).archive('c1')).map((entry) => entry.messageId));
  assert.equal(harness.memory.transcript.size, 400);
  for (const entry of harness.memory.transcript.values()) assert.ok(archived.has(entry.messageId));
  await harness.close();
});

test('8. restart resumes the same live context, summaries and markers included', async () => {
  const dir = tempDir().path;
  const first = await openHarness({ dir, summarizer: createExtractiveSummarizer(), scheduler: new LaggedScheduler(4) });
  for (let index = 0; index < 200; index += 1) await first.runtime.ingest(userMessage('c1', index));
  await first.runtime.flushCompactions();
  const before = await first.runtime.liveContext('c1');
  assert.ok(before.summaries.length > 0);
  await first.close({ keepDir: true });
  const second = await openHarness({ dir, summarizer: createExtractiveSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), before);
  await second.close();
});

test('hot-reloaded thresholds apply at once; per-channel overrides are honoured', async () => {
  const summarizer = new ScriptedSummarizer();
  summarizer.fallback = never;
  const config = new LiveConfig(testConfig());
  const harness = await openHarness({ summarizer, config });
  const { runtime } = harness;
  await fill(harness, 'c1', 0, async () => (await runtime.status('c1')).usage > 0.5);
  assert.equal(await runtime.check('c1'), 'none');
  const current = config.current();
  config.replace({ ...current, defaults: { ...current.defaults, compaction: { ...current.defaults.compaction, backgroundThreshold: 0.4, aggressiveThreshold: 0.45 } } });
  // The reload itself checked the loaded channel: no message had to arrive first.
  assert.equal(harness.ofType('compaction_triggered').at(-1)?.tier, 'aggressive');
  assert.equal((await runtime.status('c1')).compactionRunning, true);

  const small = { ...current.defaults, contextWindow: 500 };
  config.replace({ ...config.current(), channels: { c2: small } });
  await runtime.ingest(userMessage('c2', 0));
  await runtime.ingest(userMessage('c2', 1));
  assert.equal((await runtime.status('c2')).contextWindow, 500);
  assert.ok((await runtime.status('c2')).usage > (await runtime.status('c3')).usage);
  await harness.close();
});

test('compactNow compacts on request and reports busy while a worker runs', async () => {
  const pending = gate('On request.');
  const harness = await openHarness({ summarizer: new ScriptedSummarizer().enqueue(pending.behaviour) });
  const { runtime } = harness;
  for (let index = 0; index < 10; index += 1) await runtime.ingest(userMessage('c1', index));
  const outcome = runtime.compactNow('c1');
  assert.equal((await runtime.compactNow('c1')).status, 'busy');
  pending.open();
  const result = await outcome;
  assert.equal(result.status, 'completed');
  assert.equal(result.messagesCompacted, 5);
  assert.equal((await runtime.liveContext('c1')).entries.length, 5);
  await harness.close();
});

void (null as unknown as HistoryEntry);

test('4. a worker started during a turn leaves the message being answered with its reply', async () => {
  const pending = gate('Older talk.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer, configValue: testConfig({ compaction: { backgroundFraction: 0.99 } }) });
  const { runtime } = harness;
  let next = await fill(harness, 'c1', 0, async () => (await runtime.status('c1')).usage > 0.7);
  const question = await runtime.ingest(userMessage('c1', next++));
  await runtime.runSerial('c1', async () => {
    // Others keep talking while the bot thinks; the window fills and a worker starts.
    next = await fill(harness, 'c1', next, () => started(harness) === 1);
    await runtime.appendToTurn('c1', [{ kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'Answer.' }], question.turnId);
  });
  const taken = summarizer.requests[0]!.entries;
  assert.ok(taken.every((entry) => entry.seq < question.seq), 'the question stays live with its reply');
  pending.open();
  await harness.runtime.compactionsIdle();
  const live = (await runtime.liveContext('c1')).entries;
  assert.equal(live[0]!.seq, question.seq);
  await harness.close();
});

/**
 * A busy channel answered one message at a time, as the bot does: while each answer is being
 * written the next question comes in and is asked, so each reply lands after the next question
 * (turns overlap in a chain). Returns the question whose turn is running now, its model call
 * waiting, the reply before it stored after it.
 */
async function answeringChain(harness: Harness, turns: ReturnType<typeof channelTurns>, questions: number): Promise<{ question: HistoryEntry; next: number }> {
  const { runtime } = harness;
  let next = 0;
  let question = await runtime.ingest(userMessage('c1', next++));
  void turns.ask(question);
  await waitUntil(() => turns.model.calls.length === 1, 'the first turn');
  for (let asked = 1; asked < questions; asked += 1) {
    const following = await runtime.ingest(userMessage('c1', next++));
    void turns.ask(following);
    turns.model.calls[asked - 1]!.answer(`Answer to ${question.messageId}.`);
    await waitUntil(() => turns.model.calls.length === asked + 1, 'the next turn');
    question = following;
  }
  const live = (await runtime.liveContext('c1')).entries;
  assert.ok(live.at(-1)!.role === 'assistant' && live.at(-1)!.seq > question.seq, 'the previous reply landed after the question now answered');
  assert.ok(turns.model.sent(questions - 1, question.content), 'the turn read its question');
  return { question, next };
}

/** Gives the running turn its answer and checks that its question and its reply ended up together, live. */
async function answerAndCheck(harness: Harness, turns: ReturnType<typeof channelTurns>, question: HistoryEntry): Promise<void> {
  turns.model.calls.at(-1)!.answer(`Answer to ${question.messageId}.`);
  assert.equal(await turns.outcomes.at(-1), 'replied');
  const live = (await harness.runtime.liveContext('c1')).entries;
  const turn = live.filter((entry) => entry.turnId === question.turnId);
  assert.deepEqual(turn.map((entry) => entry.role), ['user', 'assistant'], 'the question is live with its reply');
}

test('4. a turn whose question came in before the previous reply landed keeps it live while a worker lands', async () => {
  const pending = gate('Older talk.');
  // A worker that takes nearly everything it may: only the protection keeps the question out.
  const harness = await openHarness({ summarizer: new ScriptedSummarizer().enqueue(pending.behaviour), configValue: testConfig({ compaction: { backgroundFraction: 0.99 } }) });
  const turns = channelTurns(harness, 'c1');
  const { question, next } = await answeringChain(harness, turns, 8);
  await fill(harness, 'c1', next, () => started(harness) === 1);
  pending.open();
  await harness.runtime.compactionsIdle();
  assert.equal(harness.ofType('compaction_completed').length, 1, 'the worker landed while the turn ran');
  const live = (await harness.runtime.liveContext('c1')).entries;
  assert.ok(live.some((entry) => entry.seq === question.seq), 'the question being answered is live');
  assert.equal(turns.model.calls.length, 8, 'the same turn is still running');
  await answerAndCheck(harness, turns, question);
  await harness.close();
});

test('4. a turn whose question came in before the previous reply landed keeps it live through an emergency cut', async () => {
  const harness = await openHarness({ summarizer: new ScriptedSummarizer() });
  const turns = channelTurns(harness, 'c1');
  const chain = await answeringChain(harness, turns, 8);
  const { question } = chain;
  let { next } = chain;
  // Long pastes while the bot writes: the window overflows at once, far past what the oldest
  // half frees.
  while (harness.ofType('emergency_truncation').length === 0 && next < 20) await harness.runtime.ingest(userMessage('c1', next++, { words: 600 }));
  const truncation = harness.ofType('emergency_truncation')[0]!;
  assert.ok(Number(truncation.messages_dropped) > 0, 'the cut dropped the older talk');
  const live = (await harness.runtime.liveContext('c1')).entries;
  assert.ok(live.some((entry) => entry.seq === question.seq), 'the question being answered is live');
  await answerAndCheck(harness, turns, question);
  await harness.close();
});

test('4. a queued turn keeps its question live: the check after the turn ahead of it plans no worker that reads it', async () => {
  const harness = await openHarness({ summarizer: new ScriptedSummarizer() });
  const turns = channelTurns(harness, 'c1');
  const { runtime } = harness;
  let next = 0;
  const first = await runtime.ingest(userMessage('c1', next++));
  void turns.ask(first);
  await waitUntil(() => turns.model.calls.length === 1, 'the first turn');
  // The next question is asked while the first answer is written: its turn waits in the queue.
  const question = await runtime.ingest(userMessage('c1', next++));
  void turns.ask(question);
  // Others talk meanwhile until a worker is due; none may start while the first turn runs.
  next = await fill(harness, 'c1', next, async () => (await runtime.status('c1')).usage >= 0.8);
  assert.equal(started(harness), 0);
  turns.model.calls[0]!.answer('Answer to the first question.');
  await waitUntil(() => turns.model.calls.length === 2, 'the queued turn');
  assert.ok(turns.model.sent(1, question.content), 'the queued turn read its question');
  // A worker starts (and is given its range) inside the check that plans it.
  for (const event of harness.ofType('compaction_started')) {
    assert.ok(Number(event.to_seq) < question.seq, `a worker took the question its queued turn answers: ${JSON.stringify(event)}`);
  }
  assert.ok((await runtime.liveContext('c1')).entries.some((entry) => entry.seq === question.seq), 'the question is live');
  await answerAndCheck(harness, turns, question);
  await harness.close();
});

test('4. a worker that read a message before the bot was asked to answer it does not land while that turn runs', async () => {
  const pending = gate('Older talk, the question included.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ summarizer, configValue: testConfig({ compaction: { backgroundFraction: 0.99 } }) });
  const { runtime } = harness;
  const turns = channelTurns(harness, 'c1');
  const next = await fill(harness, 'c1', 0, async () => (await runtime.status('c1')).usage > 0.6);
  const question = await runtime.ingest(userMessage('c1', next));
  await fill(harness, 'c1', next + 1, () => started(harness) === 1);
  await waitUntil(() => summarizer.requests.length === 1, 'the worker reading its range');
  assert.ok(summarizer.requests[0]!.entries.some((entry) => entry.seq === question.seq), 'the worker read the question before it was asked');
  void turns.ask(question);
  await waitUntil(() => turns.model.calls.length === 1, 'the turn');
  pending.open();
  await runtime.compactionsIdle();
  assert.deepEqual(harness.ofType('compaction_replanned').map((event) => event.reason), ['answer_awaited']);
  assert.ok((await runtime.liveContext('c1')).entries.some((entry) => entry.seq === question.seq), 'the question is live');
  await answerAndCheck(harness, turns, question);
  await harness.close();
});

test('6b. back-to-back truncations grow one marker instead of stacking markers without bound', async () => {
  const dir = tempDir().path;
  // The system prompt alone is over the window: every message truncates.
  const configValue = testConfig({ contextWindow: 200, systemPrompt: 'x'.repeat(1000) });
  const first = await openHarness({ dir, configValue, summarizer: new ScriptedSummarizer() });
  for (let index = 0; index < 30; index += 1) await first.runtime.ingest(userMessage('c1', index));
  // Each message stays through its own check (it may be answered) and goes at the next one.
  await first.runtime.check('c1');
  const truncations = first.ofType('emergency_truncation');
  // The first message alone frees less than its marker costs: it goes with the second.
  assert.equal(truncations.length, 29);
  assert.ok(truncations.slice(1).every((event) => event.merged_into_marker === true));
  const { summaries, entries } = await first.runtime.liveContext('c1');
  assert.equal(summaries.length, 1);
  assert.equal(entries.length, 0);
  assert.match(summaries[0]!.content, /^30 older messages were truncated/);
  const archived = (await first.db.prepare('SELECT COUNT(*) AS n FROM history_entries').get()) as { n: number };
  assert.equal(archived.n, 30, 'all 30 still in the archive');
  const before = await first.runtime.liveContext('c1');
  await first.close({ keepDir: true });

  const second = await openHarness({ dir, configValue, summarizer: new ScriptedSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), before, 'the grown marker survives a restart');
  await second.runtime.ingest(userMessage('c1', 30));
  await second.runtime.check('c1');
  assert.equal((await second.runtime.liveContext('c1')).summaries.length, 1);
  assert.match((await second.runtime.liveContext('c1')).summaries[0]!.content, /^31 older messages/);
  await second.close();
});

test('2. a worker whose plan held messages back, overtaken by an emergency cut, still lands on the marker for what it read', async () => {
  const dir = tempDir().path;
  const pending = gate('Alice asked and was answered about words 1 to 40.');
  const summarizer = new ScriptedSummarizer().enqueue(pending.behaviour);
  const harness = await openHarness({ dir, summarizer });
  const { runtime } = harness;
  // A busy channel: the bot answers one message at a time, and while it writes, someone else
  // talks and the next question comes in, so each reply lands after the next question: turns
  // overlap in a chain and no turn boundary lies near any fraction.
  let next = 0;
  let question = await runtime.ingest(userMessage('c1', next++));
  const talk = async (until: () => boolean): Promise<void> => {
    for (let rounds = 0; !until() && rounds < 100; rounds += 1) {
      await runtime.runSerial('c1', async () => {
        await runtime.ingest(userMessage('c1', next++, { author: 'bob' }));
        const following = await runtime.ingest(userMessage('c1', next++));
        const reply = { kind: 'message' as const, role: 'assistant' as const, authorId: 'bot', authorName: 'Magpie', content: `Reply to ${question.messageId}.` };
        await runtime.appendToTurn('c1', [reply], question.turnId);
        question = following;
      });
    }
    assert.ok(until(), 'the channel reached the state asked for');
  };
  await talk(() => started(harness) === 1);
  const start = harness.ofType('compaction_started')[0]!;
  assert.ok(Number(start.messages_held) > 0, 'the worker held back questions whose replies lay past its cut');
  const read = summarizer.requests[0]!.entries;
  const readSeqs = new Set(read.map((entry) => entry.seq));
  // The talk goes on, the held questions get their replies, and the window fills up while the
  // worker is still out: an emergency cut overtakes it.
  await talk(() => harness.ofType('emergency_truncation').length === 1);
  assert.equal(harness.ofType('emergency_truncation')[0]!.preempted_worker, true);
  const beforeLanding = await runtime.liveContext('c1');
  assert.ok(read.every((entry) => !beforeLanding.entries.some((live) => live.seq === entry.seq)), 'the cut dropped all the worker read');

  pending.open();
  await runtime.compactionsIdle();
  assert.deepEqual(harness.ofType('compaction_replanned'), [], 'the summary was not thrown away');
  const completed = harness.ofType('compaction_completed');
  assert.equal(completed.length, 1);
  assert.equal(completed[0]!.replaced_marker, true);
  assert.equal(completed[0]!.messages_compacted, read.length);

  const after = await runtime.liveContext('c1');
  const summary = after.summaries.find((item) => item.kind === 'summary')!;
  assert.ok(summary, 'the summary is live');
  assert.match(summary.content, /words 1 to 40/);
  assert.deepEqual([summary.fromSeq, summary.toSeq], [read[0]!.seq, start.to_seq], 'it stands for exactly the range the worker read');
  const markers = after.summaries.filter((item) => item.kind === 'marker');
  for (const marker of markers) assert.ok(marker.fromSeq > summary.toSeq, 'what the marker still stands for comes after the summary');
  for (let at = 1; at < after.summaries.length; at += 1) assert.ok(after.summaries[at - 1]!.toSeq < after.summaries[at]!.fromSeq, 'ranges in order, apart');

  // Nothing lost, nothing twice: each archived entry is live, under the summary (read by the
  // worker) or behind the marker, and the marker counts exactly the rest.
  const archive = await new HistoryStore(harness.db).archive('c1');
  const live = after.entries.map((entry) => entry.seq);
  assert.deepEqual(live, [...new Set(live)].sort((left, right) => left - right), 'live entries in order, each once');
  assert.ok(live.every((seq) => !readSeqs.has(seq)), 'nothing the summary covers is live as well');
  const behindMarkers = archive.filter((entry) => !live.includes(entry.seq) && !readSeqs.has(entry.seq));
  const counted = markers.reduce((sum, marker) => sum + Number(/^(\d+) older message/.exec(marker.content)![1]), 0);
  assert.equal(counted, behindMarkers.length, 'the markers stand for every entry neither live nor summarized');
  // The questions the worker held back did not go under its summary: the cut had dropped them
  // with their replies, so they stay behind the marker.
  const heldBack = archive.filter((entry) => entry.seq <= Number(start.to_seq) && !readSeqs.has(entry.seq));
  assert.equal(heldBack.length, Number(start.messages_held));
  assert.ok(heldBack.every((entry) => !live.includes(entry.seq)), 'dropped by the cut');
  // Each turn whole in one place: live, under the summary or behind the marker.
  const place = (seq: number) => (live.includes(seq) ? 'live' : readSeqs.has(seq) ? 'summary' : 'marker');
  const places = new Map<number, Set<string>>();
  for (const entry of archive) places.set(entry.turnId, (places.get(entry.turnId) ?? new Set()).add(place(entry.seq)));
  for (const [turnId, sides] of places) assert.equal(sides.size, 1, `turn ${turnId} is split: ${[...sides].join(', ')}`);

  // The database agrees, and a restart brings back the same context.
  const stored = await new HistoryStore(harness.db).load('c1');
  assert.deepEqual(stored.entries.map((entry) => entry.seq), live);
  assert.deepEqual(stored.summaries, after.summaries);
  await harness.close({ keepDir: true });
  const second = await openHarness({ dir, summarizer: new ScriptedSummarizer() });
  assert.deepEqual(await second.runtime.liveContext('c1'), after);
  await second.close();
});
