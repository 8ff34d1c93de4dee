/**
 * Question words and function words do not drive a search, and a query with no meaningful match
 * returns nothing: an empty list, `(no results)` in the CLI, never the least-bad noise.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore } from '../src/memory/index.js';
import { runMagpie } from './support/magpie-process.js';
import { conversation } from './support/memory-store.js';
import { openTestDatabase } from './support/storage.js';

const LINES: Array<[string, string]> = [
  ['Ana', 'we went with PostgreSQL 16, not MongoDB'],
  ['Ben', '🎉🎉🎉 🙌'],
  ['Yuki', '了解しました！'],
  ['Cleo', 'ok'],
  ['Ana', 'lol that is so true'],
  ['Ben', 'Mira booked the kayak trip for the second weekend of June'],
  ['Cleo', 'What time is it over there?'],
  ['Ana', 'Did you see what they did with the new lobby?'],
  ['Ben', 'I chose the blue one in the end'],
  ['Yuki', 'Where are we going for lunch, and who is coming?'],
  ['Ana', 'the ferry leaves at noon'],
  ['Ben', 'the ferry leaves at noon'],
];

describe('search phrasing (real process)', () => {
  let work: string;
  let dataDir: string;

  before(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
    dataDir = path.join(work, 'data');
    const db = await openTestDatabase(dataDir);
    const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
    await store.archiveTranscript(conversation('c1', LINES));
    await store.close();
    await db.close();
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const search = (query: string, json: boolean) =>
    runMagpie(['memory', 'search', query, '--data-dir', dataDir, '--channel', 'c1', ...(json ? ['--json'] : [])], {
      cwd: work,
      env: { ...process.env, MAGPIE_DATA_DIR: '' },
    });

  test('nonsense finds nothing: an empty JSON list, and (no results) for a person', async () => {
    const asJson = await search('xyzzy plugh', true);
    assert.equal(asJson.code, 0, asJson.stderr);
    assert.deepEqual(JSON.parse(asJson.stdout), []);
    const asText = await search('xyzzy plugh', false);
    assert.equal(asText.code, 0, asText.stderr);
    assert.equal(asText.stdout, '(no results)\n');
  });

  test('an empty or overlong query is bad usage, named before anything is opened', async () => {
    for (const [query, message] of [
      ['   ', /^magpie memory: QUERY must not be empty\n/],
      ['x'.repeat(2001), /^magpie memory: QUERY is 2001 characters long; the limit is 2000\n/],
    ] as const) {
      const { code, stdout, stderr } = await search(query, false);
      assert.equal(code, 2, stderr);
      assert.equal(stdout, '');
      assert.match(stderr, message);
      assert.match(stderr, /Usage: magpie memory search QUERY/);
    }
  });

  test('a question sharing only function words with the archive returns no noise', async () => {
    for (const query of ['what database did we choose', 'who did what and when?', 'the of and to']) {
      const { code, stdout, stderr } = await search(query, true);
      assert.equal(code, 0, stderr);
      assert.deepEqual(JSON.parse(stdout), [], `"${query}" should find nothing here`);
    }
  });

  test('the words that matter find their line, whatever question is wrapped around them', async () => {
    for (const query of ['when is the kayak trip?', 'what did Mira book for June', 'which one did we go with, PostgreSQL or MongoDB?']) {
      const { code, stdout, stderr } = await search(query, true);
      assert.equal(code, 0, stderr);
      const results = JSON.parse(stdout) as Array<{ message_id: string }>;
      assert.ok(results.length > 0, `"${query}" finds something`);
      assert.ok(['m5', 'm0'].includes(results[0]!.message_id), `"${query}" finds its line first, got ${results[0]!.message_id}`);
    }
  });

  test('a question about someone and something nobody said finds nothing, not whatever they said', async () => {
    for (const query of ['what did Ben say about the database', 'did Cleo mention the budget?']) {
      const { code, stdout, stderr } = await search(query, true);
      assert.equal(code, 0, stderr);
      assert.deepEqual(JSON.parse(stdout), [], `"${query}" should find nothing here`);
    }
    // Asked about the person alone, their lines are the answer.
    const { code, stdout, stderr } = await search('what did Ben say', true);
    assert.equal(code, 0, stderr);
    const results = JSON.parse(stdout) as Array<{ author: string }>;
    assert.ok(results.length > 0 && results.every((result) => result.author === 'Ben'), JSON.stringify(results.map((result) => result.author)));
  });

  test('a query naming a participant ranks what they said first', async () => {
    for (const [query, expected] of [
      ['when did Ben say the ferry leaves?', 'm11'],
      ['what did Ana say about the ferry', 'm10'],
    ]) {
      const { code, stdout, stderr } = await search(query!, true);
      assert.equal(code, 0, stderr);
      assert.equal((JSON.parse(stdout) as Array<{ message_id: string }>)[0]?.message_id, expected, query);
    }
  });
});

test('a topic too common to rank is not taken for one nobody mentioned: the named person\'s lines stay', async () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  const db = await openTestDatabase(work);
  // A posting budget of 5 leaves "meeting" (in 8 messages) out of the ranked words, as a word
  // said in thousands of messages is left out of a real channel's.
  const store = await openMemoryStore({ db, dataDir: work, settings: DEFAULTS.memory, tuning: { textPostingBudget: 5 } });
  try {
    const lines: Array<[string, string]> = [
      ['Cleo', 'the meeting moved to Thursday'],
      ['Cleo', 'I will bring the slides'],
      ...Array.from({ length: 7 }, (_, index): [string, string] => ['Ana', `meeting notes part ${index}`]),
    ];
    await store.archiveTranscript(conversation('c9', lines));
    await store.whenIndexed();
    const results = await store.search({ location: { channelId: 'c9' }, query: 'what did Cleo say about the meeting', limit: 5 });
    assert.ok(results.some((result) => result.source_ids.includes('m0')), JSON.stringify(results.map((result) => result.source_ids)));
  } finally {
    await store.close();
    await db.close();
    rmSync(work, { recursive: true, force: true });
  }
});

