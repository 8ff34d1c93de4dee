/**
 * A word said in more messages than the full-text posting budget: only the newest of them in
 * the caller's scope are ranked, the same rows with the same BM25 on SQLite and PostgreSQL,
 * and the IDF still counts the whole store.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore, type TranscriptEntryInput } from '../src/memory/index.js';
import { Fts5FullText } from '../src/memory/fts5-full-text.js';
import { PgFullText } from '../src/memory/pg-full-text.js';
import type { FullText } from '../src/memory/full-text.js';
import { visibility } from '../src/memory/scope.js';
import { searchTerms } from '../src/memory/search-text.js';
import { openDatabase } from '../src/storage/database.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { withBothBackends, withTempDir } from './support/both-backends.js';
import { requirePostgres } from './support/postgres-available.js';

const SCAN = 40;

/** 240 lines in the searched channel and 80 elsewhere, every one saying "budget", lengths varied. */
function corpus(): TranscriptEntryInput[] {
  const fillers = ['', ' for the trip', ' and the venue and the catering', ' again, see the sheet with every line item in it'];
  return Array.from({ length: 320 }, (_, index) => ({
    channelId: index % 4 === 3 ? 'elsewhere' : 'busy',
    messageId: `m${index}`,
    authorId: 'ana',
    authorName: 'Ana',
    content: `budget${index % 7 === 0 ? ' budget' : ''}${fillers[index % fillers.length]!}`,
    createdAt: 1_700_000_000_000 + index * 60_000,
  }));
}

async function rank(
  db: SqlClient,
  dataDir: string,
  fullText: (db: SqlClient) => FullText,
  options: { query?: string; counts?: number[]; extra?: TranscriptEntryInput[] } = {},
): Promise<Array<{ id: string; strength: number }>> {
  const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
  try {
    await store.archiveTranscript([...corpus(), ...(options.extra ?? [])]);
    await store.whenIndexed();
  } finally {
    await store.close();
  }
  const view = await visibility({ channelId: 'busy' }, 'channel');
  return withMessageIds(db, await fullText(db).candidates(searchTerms(options.query ?? 'budget'), { visibility: view }, 20, SCAN, options.counts));
}

/** Full-text hits named by their message ids. */
async function withMessageIds(db: SqlClient, hits: Array<{ label: number; strength: number }>): Promise<Array<{ id: string; strength: number }>> {
  const ids = (await db.prepare('SELECT rowid, message_id FROM memory_items').all()) as Array<{ rowid: number; message_id: string }>;
  const byRowid = new Map(ids.map((row) => [Number(row.rowid), row.message_id]));
  return hits.map((hit) => ({ id: byRowid.get(Number(hit.label))!, strength: hit.strength }));
}

/** The messages of the searched channel a capped scan may rank: its newest `SCAN`. */
function newestInScope(): Set<string> {
  const busy = corpus().filter((entry) => entry.channelId === 'busy');
  return new Set(busy.slice(-SCAN).map((entry) => entry.messageId));
}

test('a word in more messages than the budget is ranked among the newest of them in scope, on SQLite', async () => {
  await withTempDir(async (sqliteDir) => {
    const db = await openDatabase(sqliteDir, ALL_MIGRATIONS);
    try {
      const hits = await rank(db, sqliteDir, (client) => new Fts5FullText(client));
      assert.equal(hits.length, 20);
      const allowed = newestInScope();
      for (const hit of hits) assert.ok(allowed.has(hit.id), `${hit.id} is not among the newest ${SCAN} of the channel`);
      // Repeated and short lines first, as BM25 has it.
      assert.ok(hits[0]!.strength > hits.at(-1)!.strength);
    } finally {
      await db.close();
    }
  });
});

test('PostgreSQL ranks the same newest rows with the same BM25 as SQLite when the budget is exceeded', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withBothBackends('search-scan-cap test', async (sqlite, postgres) => {
    const expected = await rank(sqlite.db, sqlite.dir, (client) => new Fts5FullText(client));
    const actual = await rank(postgres.db, postgres.dir, (client) => new PgFullText(client));
    assert.deepEqual(
      actual.map((hit) => hit.id),
      expected.map((hit) => hit.id),
    );
    actual.forEach((hit, position) => assert.ok(Math.abs(hit.strength - expected[position]!.strength) < 1e-9, `strength of ${hit.id}`));
  });
});

test('on PostgreSQL the caller\'s counts are the document frequencies: exact ones give SQLite\'s strengths, stale ones the same rows', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withBothBackends('search-scan-cap counts test', async (sqlite, postgres) => {
    const expected = await rank(sqlite.db, sqlite.dir, (client) => new Fts5FullText(client));
    await rank(postgres.db, postgres.dir, (client) => new PgFullText(client));
    const counts = await new PgFullText(postgres.db).termCounts(searchTerms('budget'));
    assert.deepEqual(counts, [320]);
    const counted = await rank(postgres.db, postgres.dir, (client) => new PgFullText(client), { counts });
    assert.deepEqual(
      counted.map((hit) => hit.id),
      expected.map((hit) => hit.id),
    );
    counted.forEach((hit, position) => assert.ok(Math.abs(hit.strength - expected[position]!.strength) < 1e-9, `strength of ${hit.id}`));
    // A count kept from before 20 more rows said the word: the rows ranked are the same (the
    // newest in scope), and only the IDF moves.
    const stale = await rank(postgres.db, postgres.dir, (client) => new PgFullText(client), { counts: [300] });
    assert.deepEqual(new Set(stale.map((hit) => hit.id)), new Set(counted.map((hit) => hit.id)));
    assert.ok(stale.every((hit) => hit.strength > 0));
    // More rows than the store's row count holds (a large store's count is the planner's
    // estimate, which can lag): the word weighs next to nothing, as FTS5 weighs a word in
    // every row, and the search does not fail on the logarithm of a negative number.
    const beyond = await rank(postgres.db, postgres.dir, (client) => new PgFullText(client), { counts: [1_000_000] });
    assert.deepEqual(new Set(beyond.map((hit) => hit.id)), new Set(counted.map((hit) => hit.id)));
    assert.ok(beyond.every((hit) => hit.strength >= 0 && hit.strength < 1e-4), JSON.stringify(beyond.slice(0, 3)));
  });
});

test('a stale count of postings below the budget still ranks only the newest rows in scope', async () => {
  await withTempDir(async (sqliteDir) => {
    const db = await openDatabase(sqliteDir, ALL_MIGRATIONS);
    try {
      // The hint says one row matches: 320 do, so the capped scan must still be used.
      const hits = await rank(db, sqliteDir, (client) => new Fts5FullText(client), { counts: [1] });
      const allowed = newestInScope();
      assert.equal(hits.length, 20);
      for (const hit of hits) assert.ok(allowed.has(hit.id), `${hit.id} is not among the newest ${SCAN} of the channel`);
    } finally {
      await db.close();
    }
  });
});

test('words in fewer messages than the budget rank every match in scope, none from elsewhere, as PostgreSQL does', async (t) => {
  // Twelve lines about a ferry, alternating between the channel and another one: far under the
  // budget, so every match is ranked and the scope is read from each row.
  const extra: TranscriptEntryInput[] = Array.from({ length: 12 }, (_, index) => ({
    channelId: index % 2 === 0 ? 'busy' : 'elsewhere',
    messageId: `ferry${index}`,
    authorId: 'ben',
    authorName: 'Ben',
    content: `the ferry${index % 3 === 0 ? ' ferry' : ''} leaves at noon${' from the old pier'.repeat(index % 4)}`,
    createdAt: 1_800_000_000_000 + index * 60_000,
  }));
  const options = { query: 'when does the ferry leave', extra };
  const inScope = new Set(extra.filter((entry) => entry.channelId === 'busy').map((entry) => entry.messageId));
  await withTempDir(async (sqliteDir) => {
    const db = await openDatabase(sqliteDir, ALL_MIGRATIONS);
    try {
      const hits = await rank(db, sqliteDir, (client) => new Fts5FullText(client), options);
      assert.deepEqual(new Set(hits.map((hit) => hit.id)), inScope);
      // The same rows and order whether or not the caller passes its (here exact) count.
      const hinted = await rank(db, sqliteDir, (client) => new Fts5FullText(client), { ...options, counts: await new Fts5FullText(db).termCounts(searchTerms(options.query)) });
      assert.deepEqual(hinted, hits);
    } finally {
      await db.close();
    }
  });
  if (!(await requirePostgres(t))) return;
  await withBothBackends('search-scan-cap few test', async (sqlite, postgres) => {
    const expected = await rank(sqlite.db, sqlite.dir, (client) => new Fts5FullText(client), options);
    const actual = await rank(postgres.db, postgres.dir, (client) => new PgFullText(client), options);
    assert.deepEqual(
      actual.map((hit) => hit.id),
      expected.map((hit) => hit.id),
    );
    actual.forEach((hit, position) => assert.ok(Math.abs(hit.strength - expected[position]!.strength) < 1e-9, `strength of ${hit.id}`));
  });
});

test('on PostgreSQL a channel whose matches are all old, behind many newer ones elsewhere, still gets its own newest', async (t) => {
  // 'quiet' said "budget" long ago and has talked of other things since; the store's newest
  // "budget" lines are all elsewhere. Going by its share of the store, the newest part of the
  // table should hold enough of its matches, and it holds none: PostgreSQL must read on.
  const extra: TranscriptEntryInput[] = [
    ...Array.from({ length: 60 }, (_, index) => ({
      channelId: 'quiet',
      messageId: `q-old${index}`,
      authorId: 'cy',
      authorName: 'Cy',
      content: `budget${' item'.repeat(index % 5)}`,
      createdAt: 1_600_000_000_000 + index * 60_000,
    })),
    ...Array.from({ length: 400 }, (_, index) => ({
      channelId: 'quiet',
      messageId: `q-new${index}`,
      authorId: 'cy',
      authorName: 'Cy',
      content: `lunch plans ${index}`,
      createdAt: 1_900_000_000_000 + index * 60_000,
    })),
  ];
  const rankQuiet = async (db: SqlClient, dir: string, fullText: (db: SqlClient) => FullText): Promise<string[]> => {
    const store = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory });
    try {
      // The old lines first, then the whole busy corpus, then the new ones.
      await store.archiveTranscript(extra.slice(0, 60));
      await store.archiveTranscript(corpus());
      await store.archiveTranscript(extra.slice(60));
      await store.whenIndexed();
    } finally {
      await store.close();
    }
    const view = await visibility({ channelId: 'quiet' }, 'channel');
    const terms = searchTerms('budget');
    const engine = fullText(db);
    const hits = await engine.candidates(terms, { visibility: view }, 20, SCAN, await engine.termCounts(terms));
    return (await withMessageIds(db, hits)).map((hit) => hit.id);
  };
  if (!(await requirePostgres(t))) return;
  await withBothBackends('search-scan-cap old matches test', async (sqlite, postgres) => {
    const expected = await rankQuiet(sqlite.db, sqlite.dir, (client) => new Fts5FullText(client));
    assert.equal(expected.length, 20);
    // Only the newest SCAN of quiet's 60 old matches are ranked.
    for (const id of expected) assert.ok(Number(id.replace('q-old', '')) >= 60 - SCAN, id);
    assert.deepEqual(await rankQuiet(postgres.db, postgres.dir, (client) => new PgFullText(client)), expected);
  });
});
