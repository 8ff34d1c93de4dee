/**
 * A running turn's system prompt follows the deletes and edits that reach its channel
 * (`followSummaries`): a summary covering a changed message is withheld until the change's
 * propagation has run, then shown as the propagation left it, or not at all once retired.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { followSummaries, WITHHELD_SUMMARY } from '../src/channel/turn-requests.js';
import type { LateChange } from '../src/channel/turn-watches.js';
import { buildSystemPrompt } from '../src/channel/model-request.js';
import { removalTarget } from '../src/channel/privacy-propagator.js';
import type { SummaryEntry } from '../src/context/types.js';

function summary(id: number, fromSeq: number, toSeq: number, content: string): SummaryEntry {
  return { id, channelId: 'c1', kind: 'summary', fromSeq, toSeq, content, tokens: 10, createdAt: 0 };
}

function deleted(seq: number, content: string): LateChange {
  const removed = [{ seq, messageId: `m${seq}`, authorName: 'Ana', content }];
  return { mode: 'delete', removed, edited: [], quotes: undefined, target: removalTarget(removed, 'delete') };
}

describe('the system prompt of a running turn follows changes to the messages its summaries cover', () => {
  const first = summary(1, 0, 9, 'Ana gave the gate code 5512-PLOVER.');
  const second = summary(2, 10, 19, 'Ben planned the picnic.');
  const source = { systemPrompt: 'You are Magpie.', summaries: [first, second] };

  test('nothing changed, or only messages no summary covers: the prompt stays as it was', () => {
    const changes: LateChange[] = [];
    const follow = followSummaries({ changes: () => changes }, source);
    assert.equal(follow(), undefined);
    changes.push(deleted(25, 'a live message'));
    assert.equal(follow(), undefined);
  });

  test('a covered message deleted: withheld at once, then as the propagation left it, then gone once retired', () => {
    const change = deleted(4, 'the gate code is 5512-PLOVER');
    const changes: LateChange[] = [change];
    const follow = followSummaries({ changes: () => changes }, source);

    const withheld = follow();
    assert.ok(withheld);
    assert.ok(!withheld.system.includes('PLOVER'));
    assert.ok(withheld.system.includes(WITHHELD_SUMMARY));
    assert.ok(withheld.system.includes('Ben planned the picnic.'), 'a summary the change does not touch stays');
    assert.equal(withheld.systemBreaks.length, 2, 'the prompt, then the first summary');
    assert.equal(follow(), undefined, 'asked again with nothing new: unchanged');

    change.summaries = [{ ...first, kind: 'marker', content: '10 older messages were truncated', live: true }];
    const marked = follow();
    assert.ok(marked);
    assert.equal(marked.system, buildSystemPrompt(source.systemPrompt, [{ ...first, kind: 'marker', content: '10 older messages were truncated' }, second]));

    changes.push({ ...deleted(5, 'another line'), summaries: [{ ...first, content: '(removed)', live: false }] });
    const retired = follow();
    assert.ok(retired);
    assert.equal(retired.system, buildSystemPrompt(source.systemPrompt, [second]));
  });

  test('a propagation that found nothing to take out of a covering summary leaves it shown', () => {
    const change = { ...deleted(14, 'a line the summary never quoted'), summaries: [] };
    const follow = followSummaries({ changes: () => [change] }, source);
    assert.equal(follow(), undefined);
  });
});
