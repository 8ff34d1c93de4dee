/**
 * A hit inside an earlier result's window is not shown twice: it widens that result to its own
 * neighbours, so the reply that follows it comes along (up to nine messages a result).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { conversation, openTestStore, type OpenedStore } from './support/memory-store.js';

const LINES: Array<[string, string]> = [
  ['Ana', 'the printer on floor two is jammed again'],
  ['Ben', 'I will call facilities after standup'],
  ['Ana', 'did anyone water the office ferns'],
  ['Mira', 'I booked the kayak trip for the second weekend of June'],
  ['Ben', 'nice, the lake should be warm by then'],
  ['Ana', 'which kayak rental did you book?'],
  ['Mira', 'the one by the harbour, forty euros a day'],
  ['Ben', 'cheaper than last summer'],
  ['Ana', 'the quarterly review slides are due Friday'],
  ['Ben', 'Cleo is presenting the budget section'],
  ['Ana', 'lunch at the noodle bar?'],
  ['Ben', 'sure, at half past twelve'],
];

describe('result windows', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore();
    await opened.store.archiveTranscript(conversation('w', LINES));
  });
  after(async () => opened.close());

  test('a second hit inside the first result widens it to the reply that follows', async () => {
    const results = await opened.store.search({ location: { channelId: 'w' }, query: 'kayak trip booking', limit: 5 });
    assert.equal(results[0]!.message_id, 'm3');
    // m5 matched too but sits inside m3's window: m6 (its answer) and m7 join that result.
    assert.deepEqual(results[0]!.source_ids, ['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7']);
    assert.deepEqual(
      results[0]!.neighbors!.map((item) => [item.position, item.message_id]),
      [
        ['before', 'm1'],
        ['before', 'm2'],
        ['after', 'm4'],
        ['after', 'm5'],
        ['after', 'm6'],
        ['after', 'm7'],
      ],
    );
    const shown = results.flatMap((result) => result.source_ids);
    assert.equal(new Set(shown).size, shown.length, 'no message is shown twice');
    assert.ok(!results.slice(1).some((result) => result.message_id === 'm5'));
  });
});
