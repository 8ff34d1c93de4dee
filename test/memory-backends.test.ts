/** The same memories and messages, searched the same way on SQLite and on PostgreSQL, find the same things. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore, type SearchResult, type TranscriptEntryInput } from '../src/memory/index.js';
import { openDatabase } from '../src/storage/database.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { openStorageForWriting } from '../src/storage/open-storage.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';
import { conversation } from './support/memory-store.js';

const LINES: Array<[string, string]> = [
  ['Ana', 'The kayak trip to Lake Bled is booked for the second weekend of June'],
  ['Ben', 'I still need a dry bag for my camera before we go paddling'],
  ['Ana', 'Mira said she would lend us her spare paddles and a pump'],
  ['Cleo', 'Running late today, the tram broke down near the station again'],
  ['Ben', 'My sister adopted two kittens from the shelter, Pickle and Miso'],
  ['Cleo', 'The quarterly budget review moved to Thursday at three'],
  ['Ana', 'Who is bringing the tent? Mine has a broken pole'],
  ['Ben', 'I can bring my tent, it sleeps four people comfortably'],
  ['Cleo', 'Reminder: the dentist appointment is on the 14th at 9:30'],
  ['Ana', 'I started learning the cello in January and practise every evening'],
  ['Ben', 'The kittens destroyed the curtains already, classic kittens'],
  ['Cleo', 'Budget spreadsheets are in the shared drive under finance 2024'],
  ['Ana', 'We should leave Ljubljana early to avoid traffic on the motorway'],
  ['Ben', 'Paddling lessons at the club start next month, anyone interested?'],
  ['Cleo', 'I ran my first half marathon last Sunday in two hours flat'],
  ['Ana', 'My cello teacher recommended a new rosin, it sounds much warmer'],
  ['Ben', 'Shelter volunteers are needed on Saturdays if anyone has time'],
  ['Cleo', 'The station café finally reopened with the good croissants'],
];

const QUERIES = [
  'when is the kayak trip',
  'who has a tent',
  'kittens from the shelter',
  'dentist appointment time',
  'cello lessons',
  'budget review day',
  'half marathon',
  'croissants at the station',
  'paddles and pump',
  'what should I remember about travel plans',
];

function entries(channelId: string): TranscriptEntryInput[] {
  return conversation(channelId, LINES, (index) => `${channelId}-${index}`);
}

async function searchAll(db: SqlClient, dataDir: string): Promise<SearchResult[][]> {
  const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
  try {
    await store.archiveTranscript([...entries('trip'), ...entries('other')]);
    await store.save({ location: { channelId: 'trip' }, content: 'Ana is afraid of deep water but loves kayaking', memoryType: 'fact' });
    await store.save({ location: { channelId: 'trip' }, content: 'Pack the tent and the dry bag on Friday', memoryType: 'todo' });
    await store.whenIndexed();
    // The channel's vector index loaded and caught up, as a running bot's would be.
    await store.warmIndexes(['trip']);
    await store.whenIndexed();
    const results: SearchResult[][] = [];
    for (const query of QUERIES) {
      results.push(await store.search({ location: { channelId: 'trip' }, query, limit: 5 }));
      results.push(await store.search({ location: { channelId: 'trip' }, query, kind: 'transcript', limit: 3 }));
    }
    return results;
  } finally {
    await store.close();
  }
}

test('SQLite and PostgreSQL return the same hits for the same searches', async (t) => {
  if (!(await requirePostgres(t))) return;
  const sqliteDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  const pgDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  const sqlite = await openDatabase(sqliteDir, ALL_MIGRATIONS);
  const postgres = await openStorageForWriting({ backend: 'postgres', dataDir: pgDir, url: TEST_DATABASE_URL, schema: freshSchema() }, ALL_MIGRATIONS, {
    command: 'memory-backends test',
    writerKey: 'memory-backends',
  });
  try {
    const expected = await searchAll(sqlite, sqliteDir);
    const actual = await searchAll(postgres.db, pgDir);
    // BM25 is computed alike on both (same word counts, same store-wide statistics): same order, same scores.
    const hits = (results: SearchResult[][]) => results.map((list) => list.map((result) => [result.id, result.score, result.source_ids]));
    assert.deepEqual(hits(actual), hits(expected));
  } finally {
    await sqlite.close();
    await postgres.close();
    rmSync(sqliteDir, { recursive: true, force: true });
    rmSync(pgDir, { recursive: true, force: true });
  }
});
