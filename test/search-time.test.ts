/**
 * A query naming a time ranks messages from (or about) that time higher: a date, a month, a
 * year, or "yesterday" and "last week" read against the clock; a message's own "yesterday"
 * counts for the day before it was written.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nearness, timeNamed, timesOf } from '../src/memory/query-time.js';
import { openTestStore } from './support/memory-store.js';

const DAY = 86_400_000;
const NOW = Date.UTC(2024, 2, 15, 12);

test('dates, months, years and relative times are read from a query', () => {
  const day = (year: number, month: number, date: number) => ({ start: Date.UTC(year, month, date), end: Date.UTC(year, month, date) + DAY });
  assert.deepEqual(timeNamed('What news did Maria share on 16 June, 2023?', NOW), day(2023, 5, 16));
  assert.deepEqual(timeNamed('what happened on 3 October 2023', NOW), day(2023, 9, 3));
  assert.deepEqual(timeNamed('the painting shown on October 13, 2023', NOW), day(2023, 9, 13));
  assert.deepEqual(timeNamed('deploy log 2023-10-03', NOW), day(2023, 9, 3));
  assert.deepEqual(timeNamed('what setback in October 2023', NOW), { start: Date.UTC(2023, 9, 1), end: Date.UTC(2023, 10, 1) });
  assert.deepEqual(timeNamed('how many trips in 2022', NOW), { start: Date.UTC(2022, 0, 1), end: Date.UTC(2023, 0, 1) });
  assert.deepEqual(timeNamed('camping in June', NOW), { month: 5 });
  assert.deepEqual(timeNamed('what did we decide yesterday', NOW), day(2024, 2, 14));
  assert.deepEqual(timeNamed('the outage last week', NOW), { start: Date.UTC(2024, 2, 8), end: Date.UTC(2024, 2, 15) });
  // No time, and things that only look like one.
  assert.equal(timeNamed('what database did we choose', NOW), undefined);
  assert.equal(timeNamed('ticket 2023 is open', NOW), undefined);
  assert.equal(timeNamed('on 31 Smarch 2023', NOW), undefined);
});

test('a message saying "yesterday" or "last week" is also about the day it refers to', () => {
  const written = Date.UTC(2023, 5, 16, 9);
  assert.deepEqual(timesOf('I joined a gym yesterday!', written), [written, written - DAY]);
  assert.deepEqual(timesOf('I got some great news - I joined a gym last week!', written), [written, written - 7 * DAY]);
  assert.deepEqual(timesOf('no time words here', written), [written]);
  assert.equal(nearness({ start: Date.UTC(2023, 5, 15), end: Date.UTC(2023, 5, 16) }, written - DAY, 3), 1);
  assert.equal(nearness({ month: 5 }, written, 3), 1);
  assert.equal(nearness({ start: Date.UTC(2022, 0, 1), end: Date.UTC(2023, 0, 1) }, written, 3), 0);
});

test('among equal matches, the one from the day the query names comes first', async () => {
  const opened = await openTestStore();
  try {
    const at = (year: number, month: number, date: number) => Date.UTC(year, month, date, 15);
    const lines: Array<[string, string, number]> = [
      ['a', 'We deployed the billing service again', at(2023, 8, 20)],
      ['b', 'We deployed the billing service again', at(2023, 9, 3)],
      ['c', 'We deployed the billing service again', at(2023, 10, 28)],
      ['d', 'Yesterday we deployed the billing service again', at(2023, 11, 6)],
      ['e', 'We deployed the billing service again', at(2023, 11, 20)],
    ];
    await opened.store.archiveTranscript(
      lines.map(([id, content, createdAt]) => ({ channelId: 'ops', messageId: id, authorId: 'x', authorName: 'Sam', content, createdAt })),
    );
    await opened.store.whenIndexed();
    const first = async (query: string) => (await opened.store.search({ location: { channelId: 'ops' }, query, limit: 5 }))[0]?.message_id;
    assert.equal(await first('billing deploy on 3 October 2023'), 'b');
    assert.equal(await first('billing deploy in November 2023'), 'c');
    // Written on 6 December, about the 5th.
    assert.equal(await first('what did we deploy on 5 December 2023'), 'd');
  } finally {
    await opened.close();
  }
});

test('a query naming only a time lists what was said then, and a date is not matched as words', async () => {
  const opened = await openTestStore();
  try {
    const now = Date.now();
    const lines: Array<[string, string, string, number]> = [
      ['old', 'Chloe', 'yesterday I lost my umbrella at the station', now - 500 * DAY],
      ['week', 'Ben', 'printer toner is low again', now - 4 * DAY],
      ['recent', 'Chloe', 'we need to restock the printer toner', now - DAY],
      ['dated', 'Ana', 'the lighthouse tour was fun', Date.UTC(2023, 9, 3, 12)],
      ['other', 'Ana', 'the lighthouse tour was fun', Date.UTC(2022, 4, 5, 12)],
      ['room', 'Ben', 'room 3 is free', Date.UTC(2023, 9, 3, 12, 3)],
    ];
    await opened.store.archiveTranscript(
      lines.map(([id, authorName, content, createdAt]) => ({ channelId: 'ops', messageId: id, authorId: authorName.toLowerCase(), authorName, content, createdAt })),
    );
    await opened.store.whenIndexed();
    const ids = async (query: string) => (await opened.store.search({ location: { channelId: 'ops' }, query, limit: 5 })).map((result) => result.message_id);

    // "Yesterday" is a day, not a word: the line written yesterday, not the old one saying it.
    assert.deepEqual(await ids('yesterday'), ['recent']);
    assert.deepEqual(await ids('what did we talk about yesterday?'), ['recent']);
    // Both of last week's lines; the earlier one is shown inside the later one's window.
    const lastWeek = await opened.store.search({ location: { channelId: 'ops' }, query: 'what happened last week', limit: 5 });
    assert.deepEqual(lastWeek.map((result) => result.message_id), ['recent']);
    assert.ok(lastWeek[0]!.source_ids.includes('week'), JSON.stringify(lastWeek[0]!.source_ids));
    // A word found nowhere, beside a time: nothing, not every line saying "yesterday".
    assert.deepEqual(await ids('xyzzy yesterday'), []);
    assert.equal((await ids('printer toner yesterday'))[0], 'recent');
    // Searching memories, a time alone lists the memories saved then.
    await opened.store.save({ location: { channelId: 'ops' }, content: 'Toner is ordered from the usual supplier', memoryType: 'decision' });
    const saved = await opened.store.search({ location: { channelId: 'ops' }, query: 'anything from today?', kind: 'memory', limit: 5 });
    assert.deepEqual(saved.map((result) => result.content), ['Toner is ordered from the usual supplier']);
    assert.deepEqual(await opened.store.search({ location: { channelId: 'ops' }, query: 'last year', kind: 'memory', limit: 5 }), []);
    // The date's "3" does not find "room 3 is free"; the line of that day comes first.
    const dated = await ids('lighthouse tour on 3 October 2023');
    assert.equal(dated[0], 'dated');
    assert.ok(!dated.includes('room'), `"room 3 is free" matched only the date's number: ${dated.join(', ')}`);
  } finally {
    await opened.close();
  }
});

