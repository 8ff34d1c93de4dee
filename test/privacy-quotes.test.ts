/** Loose quotes of a deleted message are found and removed; memory sources are only what the work was shown. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { resolveSources } from '../src/memory/provenance.js';
import { quoteIndex, quotedSpans, redactQuotes } from '../src/privacy/quoted-spans.js';
import { DELETED_NOTE, redactionTarget, redactToolBlock, replaceTexts } from '../src/privacy/redact.js';
import { replyReference, sameMessageText } from '../src/privacy/reply-reference.js';

const SECRET = 'The boathouse key hides under the loose blue brick near gate nine.';

test('a quote that differs in whitespace and case, or quotes a part, is found; short common phrases are not', () => {
  const index = quoteIndex([SECRET]);
  const reply = 'Sure! Alice said:\n> the boathouse key HIDES under the\n>   loose blue brick near gate nine. See you at seven.';
  const spans = quotedSpans(reply, index);
  assert.equal(spans.length, 2, JSON.stringify(spans));
  assert.equal(redactQuotes(reply, index, DELETED_NOTE), `Sure! Alice said:\n> ${DELETED_NOTE}\n>   ${DELETED_NOTE} See you at seven.`);
  // Under 20 characters in common: coincidence, left alone.
  assert.deepEqual(quotedSpans('near gate nine we met', index), []);
  assert.equal(redactQuotes('nothing in common here at all, really', index, DELETED_NOTE), 'nothing in common here at all, really');
  // Letters whose lower case is longer keep the map to the original text right.
  const turkish = quoteIndex(['İstanbul harbour ferry leaves at nine sharp']);
  assert.equal(redactQuotes('Note: İSTANBUL HARBOUR FERRY leaves at nine sharp!', turkish, '[x]'), 'Note: [x]!');
});

test('tool blocks lose loose quotes too, in JSON-escaped text and nested JSON', () => {
  const target = redactionTarget({ messageIds: [], texts: [SECRET], note: DELETED_NOTE });
  const block = JSON.stringify({
    type: 'tool_result',
    tool_use_id: 't1',
    content: JSON.stringify([{ content: 'alice: "the Boathouse key hides under the loose blue brick"', score: 0.9 }]),
  });
  const redacted = redactToolBlock(block, target);
  assert.ok(redacted !== undefined);
  assert.ok(!redacted.toLowerCase().includes('loose blue brick'), redacted);
  const call = JSON.stringify({ type: 'tool_use', id: 't2', name: 'memory_save', input: { content: 'Key: under the LOOSE blue brick near gate nine' } });
  assert.ok(!redactToolBlock(call, target)!.toLowerCase().includes('loose blue brick'));
  assert.equal(replaceTexts('a worker task: find   the boathouse key hides under the loose', target), `a worker task: find   ${DELETED_NOTE}`);
});

test('memory_save refuses a named source nobody showed the model; branches and workers infer theirs from what they saw', () => {
  assert.throws(() => resolveSources(['999'], 'a fact', { channelId: 'c1' }), /not a message of the conversation/);
  assert.deepEqual(resolveSources(['42'], 'a fact', { channelId: 'c1', sourceMessageIds: ['42'] }), ['42']);
  assert.deepEqual(resolveSources(['msg 7'], 'a fact', { channelId: 'c1', isKnownSource: (id) => id === '7' }), ['7']);
  const seenSources = new Map([
    ['10', 'Ana booked the ferry to Lisbon for Friday'],
    ['11', 'Ben prefers the window seat on long flights'],
  ]);
  const worker = { channelId: 'c1', agent: 'worker' as const, seenSourceIds: new Set(seenSources.keys()), seenSources, sourceMessageIds: ['99'] };
  assert.deepEqual(resolveSources(undefined, 'Ana travels to Lisbon by ferry on Friday', worker), ['10']);
  // A channel turn that names none keeps the messages it answers.
  assert.deepEqual(resolveSources(undefined, 'Ana travels to Lisbon', { channelId: 'c1', sourceMessageIds: ['99'] }), ['99']);
});

test('a reply stored with its author label says the same as one fetched without it; other words differ', () => {
  const stored = `${replyReference('Alice', '42')}\nsounds good`;
  assert.equal(sameMessageText(stored, `${replyReference('an earlier message', '42')}\nsounds good`), true);
  assert.equal(sameMessageText(stored, `${replyReference('Alice', '43')}\nsounds good`), false, 'another answered message');
  assert.equal(sameMessageText(stored, `${replyReference('Alice', '42')}\nsounds bad`), false);
  assert.equal(sameMessageText('plain words', 'plain words'), true);
});
