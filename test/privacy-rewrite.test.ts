/**
 * A model-written summary that covered a deleted message: a marker at once, rewritten by a
 * worker from the archive without that message; a rewrite still pending at shutdown runs at the
 * next start; a failed rewrite falls back to the extractive summarizer. Plus the redaction
 * rules on their own (shapes kept, short texts only as whole lines).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DELETED_NOTE, redactToolBlock, redactionTarget } from '../src/privacy/redact.js';
import { longestVerbatimRun } from '../src/channel/privacy-propagator.js';
import { failWith, gate, never, openHarness, replyWith, ScriptedSummarizer, userMessage } from './compaction-support.js';
import { waitUntil } from './support/wait-until.js';

test('a pending rewrite survives a restart; the new summary leaves the deleted message out', async () => {
  const first = new ScriptedSummarizer().enqueue(replyWith('Summary quoting Message 0 and the rest.'), never);
  const harness = await openHarness({ summarizer: first });
  for (let index = 0; index < 8; index += 1) await harness.runtime.ingest(userMessage('c1', index, { words: 30 }));
  const outcome = await harness.runtime.compactNow('c1');
  assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
  const covered = first.requests[0]!.entries.map((entry) => entry.messageId);
  assert.ok(covered.includes('m0'));

  await harness.runtime.deleteMessages('c1', ['m0']);
  await waitUntil(() => first.requests.length === 2, 'a rewrite worker to start', 20_000);
  const marker = (await harness.runtime.liveContext('c1')).summaries[0]!;
  assert.equal(marker.kind, 'marker');
  assert.ok(!marker.content.includes('Message 0'));
  assert.equal(first.requests.length, 2, 'a rewrite worker started');
  assert.ok(!first.requests[1]!.entries.some((entry) => entry.messageId === 'm0'), 'the rewrite reads the range without it');
  // Shut down while it runs: the marker stays, flagged, with nothing of the old text.
  await harness.close({ keepDir: true });

  const second = new ScriptedSummarizer().enqueue(replyWith('Rewritten without the deleted one.'));
  const again = await openHarness({ dir: harness.dir, summarizer: second });
  try {
    assert.equal((await again.runtime.liveContext('c1')).summaries[0]!.kind, 'marker', 'after a restart, still a marker until rewritten');
    await again.runtime.privacySettled();
    const summary = (await again.runtime.liveContext('c1')).summaries[0]!;
    assert.equal(summary.kind, 'summary');
    assert.equal(summary.content, 'Rewritten without the deleted one.');
    assert.deepEqual(second.requests[0]!.entries.map((entry) => entry.messageId), covered.filter((id) => id !== 'm0'));
    const row = (await again.db.prepare('SELECT needs_rewrite FROM history_summaries WHERE id = ?').get(summary.id)) as { needs_rewrite: number };
    assert.equal(row.needs_rewrite, 0);
    assert.ok(again.ofType('summary_rewritten').length === 1);
  } finally {
    await again.close();
  }
});

test('a rewrite the model fails falls back to the extractive summarizer; an edit triggers it too', async () => {
  const summarizer = new ScriptedSummarizer().enqueue(replyWith('Summary quoting Message 1 word5.'), failWith('model down'));
  const harness = await openHarness({ summarizer });
  try {
    for (let index = 0; index < 8; index += 1) await harness.runtime.ingest(userMessage('c2', index, { words: 30 }));
    assert.equal((await harness.runtime.compactNow('c2')).status, 'completed');
    await harness.runtime.editMessage('c2', 'm1', 'Message 1 now says something else entirely.');
    await harness.runtime.privacySettled();
    const summary = (await harness.runtime.liveContext('c2')).summaries[0]!;
    assert.equal(summary.kind, 'summary');
    assert.ok(!summary.content.includes('Summary quoting'), summary.content);
    assert.ok(harness.ofType('summary_rewrite_failed').length === 1);
    assert.equal(harness.ofType('summary_rewritten')[0]!.summarizer, 'extractive');
  } finally {
    await harness.close();
  }
});

test('a new delete while a rewrite runs wins: the older rewrite does not land', async () => {
  const held = gate('Stale rewrite that still mentions Message 3.');
  const summarizer = new ScriptedSummarizer().enqueue(replyWith('First summary.'), held.behaviour, replyWith('Fresh rewrite.'));
  const harness = await openHarness({ summarizer });
  try {
    for (let index = 0; index < 8; index += 1) await harness.runtime.ingest(userMessage('c3', index, { words: 30 }));
    assert.equal((await harness.runtime.compactNow('c3')).status, 'completed');
    await harness.runtime.deleteMessages('c3', ['m2']);
    // The first rewrite is running (held) when the second delete comes.
    await waitUntil(() => summarizer.requests.length === 2, 'the first rewrite to start', 20_000);
    await harness.runtime.deleteMessages('c3', ['m3']);
    held.open();
    await harness.runtime.privacySettled();
    assert.equal((await harness.runtime.liveContext('c3')).summaries[0]!.content, 'Fresh rewrite.');
  } finally {
    await harness.close();
  }
});

test('a rewrite costs no more than the summary it stands in for (a model\'s a quarter more at most)', async () => {
  // A short model summary of eight long messages: its rewrite after a delete must stay as short,
  // whether the model writes it (at length, here), it falls back to the extractive summarizer,
  // or the summary was extractive and is rewritten at once.
  const long = `A very long rewrite. ${'It goes on and on about every message in turn. '.repeat(60)}`;
  const summarizer = new ScriptedSummarizer().enqueue(replyWith('Eight messages, in short.'), replyWith(long), replyWith('Eight more, in short.'), failWith('model down'));
  const harness = await openHarness({ summarizer });
  try {
    const summaryOf = async (channelId: string) => (await harness.runtime.liveContext(channelId)).summaries[0]!;
    for (let index = 0; index < 8; index += 1) await harness.runtime.ingest(userMessage('c5', index, { words: 60 }));
    assert.equal((await harness.runtime.compactNow('c5')).status, 'completed');
    const before = await summaryOf('c5');
    await harness.runtime.deleteMessages('c5', ['m0']);
    await harness.runtime.privacySettled();
    const rewritten = await summaryOf('c5');
    assert.equal(rewritten.kind, 'summary');
    assert.ok(rewritten.content !== long, 'the long rewrite does not land');
    assert.ok(rewritten.tokens <= before.tokens, `the rewrite costs ${rewritten.tokens} tokens, the summary cost ${before.tokens}`);

    for (let index = 0; index < 8; index += 1) await harness.runtime.ingest(userMessage('c6', index, { words: 60 }));
    assert.equal((await harness.runtime.compactNow('c6')).status, 'completed');
    const second = await summaryOf('c6');
    await harness.runtime.deleteMessages('c6', ['m1']);
    await harness.runtime.privacySettled();
    assert.equal(harness.ofType('summary_rewritten').at(-1)!.summarizer, 'extractive', 'the model failed: the extractive summarizer wrote it');
    const fallback = await summaryOf('c6');
    assert.ok(fallback.tokens <= second.tokens, `the fallback costs ${fallback.tokens} tokens, the summary cost ${second.tokens}`);

    // An extractive summary is rewritten in the delete itself, within the same bound.
    await harness.db.prepare(`UPDATE history_summaries SET summarizer = 'extractive' WHERE id = ?`).run(fallback.id);
    await harness.runtime.deleteMessages('c6', ['m2']);
    const third = await summaryOf('c6');
    assert.equal(third.kind, 'summary');
    assert.ok(third.tokens <= fallback.tokens, `the extractive rewrite costs ${third.tokens} tokens, the summary cost ${fallback.tokens}`);
  } finally {
    await harness.close();
  }
});

test('redaction keeps the block shape; short texts go only where they stand alone', () => {
  const target = redactionTarget({ messageIds: ['42'], texts: ['ok', 'Alice: the code is 1234-abcd'], note: DELETED_NOTE });
  const result = JSON.stringify({
    type: 'tool_result',
    tool_use_id: 'toolu_1',
    content: JSON.stringify([
      { content: 'Bob: hello\nAlice: the code is 1234-abcd\nok', source_ids: ['41', '42'] },
      { message_id: '42', content: 'anything at all', author: 'Alice' },
      { content: 'okay then' },
    ]),
  });
  const redacted = JSON.parse(redactToolBlock(result, target)!) as { type: string; tool_use_id: string; content: string };
  assert.equal(redacted.type, 'tool_result');
  assert.equal(redacted.tool_use_id, 'toolu_1');
  const items = JSON.parse(redacted.content) as Array<{ content: string }>;
  assert.equal(items[0]!.content, `Bob: hello\n${DELETED_NOTE}\n${DELETED_NOTE}`);
  assert.equal(items[1]!.content, DELETED_NOTE);
  assert.equal(items[2]!.content, 'okay then', '"ok" inside a word stays');
  assert.equal(redactToolBlock(JSON.stringify({ type: 'tool_result', tool_use_id: 't', content: 'unrelated' }), target), undefined);
  const call = JSON.parse(redactToolBlock(JSON.stringify({ type: 'tool_use', id: 'toolu_2', name: 'memory_save', input: { content: 'Alice: the code is 1234-abcd' } }), target)!);
  assert.deepEqual(call, { type: 'tool_use', id: 'toolu_2', name: 'memory_save', input: { content: DELETED_NOTE } });
  assert.equal(longestVerbatimRun('say "hello world" now'), 'hello world');
});
