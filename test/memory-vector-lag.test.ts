/** Accepted means searchable: a transcript row written before its vector is found by meaning too. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { HashingEmbedder, openMemoryStore, type Embedder } from '../src/memory/index.js';
import { openTestDatabase } from './support/storage.js';

test('rows whose vector is still owed are scanned exactly by search, then indexed', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-lag-'));
  const db = await openTestDatabase(dir);
  // Vectors held back for a minute: every search below runs while they are owed.
  const store = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory, vectorDelayMs: 60_000 });
  try {
    const stage = store.transcriptStager(db);
    assert.ok(stage, 'a store on the same database stages rows');
    assert.equal(store.transcriptStager({}), undefined, 'not for another database');
    await db.transaction(async () => {
      await stage([
        { messageId: 'm1', channelId: 'c1', authorId: 'u1', authorName: 'ann', content: 'marmalade', createdAt: 1 },
        { messageId: 'm2', channelId: 'c1', authorId: 'u1', authorName: 'ann', content: 'the bus leaves at noon', createdAt: 2 },
      ]);
    });
    const location = { channelId: 'c1' };
    assert.equal((await store.stats(location)).pendingVectors, 2, 'both vectors are owed');
    // Full text finds a row at once.
    const byWord = await store.search({ location, query: 'bus noon' });
    assert.deepEqual(byWord[0]?.source_ids.includes('m2'), true);
    // A misspelling shares no FTS term, only character trigrams: only the vector side finds it.
    const text = await store.search({ location, query: 'marmaladee', kind: 'transcript' });
    assert.ok(text.some((result) => result.source_ids.includes('m1')), `found by the exact scan: ${JSON.stringify(text)}`);
    assert.equal((await store.stats(location)).pendingVectors, 2, 'still owed: the scan did not need them');
  } finally {
    await store.close();
  }
  // Closing drained the backlog: the next open finds every vector made.
  const reopened = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory });
  try {
    assert.equal((await reopened.stats({ channelId: 'c1' })).pendingVectors, 0);
    const again = await reopened.search({ location: { channelId: 'c1' }, query: 'marmaladee', kind: 'transcript' });
    assert.ok(again.some((result) => result.source_ids.includes('m1')));
  } finally {
    await reopened.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a row still owed its vector is embedded once across searches', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-lag-'));
  const db = await openTestDatabase(dir);
  const hashing = new HashingEmbedder({ dimension: DEFAULTS.memory.hashDimension });
  let embedded = 0;
  const counting: Embedder = {
    name: hashing.name,
    dimension: hashing.dimension,
    embed: (texts) => {
      embedded += texts.length;
      return hashing.embed(texts);
    },
  };
  const store = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory, embedder: counting, vectorDelayMs: 60_000 });
  try {
    const stage = store.transcriptStager(db)!;
    await db.transaction(async () => {
      await stage([{ messageId: 'm1', channelId: 'c1', authorId: 'u1', authorName: 'ann', content: 'marmalade', createdAt: 1 }]);
    });
    const location = { channelId: 'c1' };
    const search = async (): Promise<boolean> =>
      (await store.search({ location, query: 'marmaladee', kind: 'transcript' })).some((result) => result.source_ids.includes('m1'));
    const before = embedded;
    assert.ok(await search());
    assert.ok(await search());
    // Two queries and one owed row: three texts embedded, not four.
    assert.equal(embedded - before, 3);
  } finally {
    await store.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a row still owed its vector keeps its meaning in the score when feedback moves the query', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-lag-'));
  const db = await openTestDatabase(dir);
  // The hashing embedder moves the query towards the best full-text hits; those rows' own
  // cosines to the query must still count, read from the backlog scan while they are owed.
  const store = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory, vectorDelayMs: 60_000 });
  try {
    // The request has its vector (archived with it); the report that follows is still owed one.
    await store.archiveTranscript([{ messageId: 'asked', channelId: 'k', authorId: 'u1', authorName: 'root', content: 'please index the recipes', createdAt: 1 }]);
    const stage = store.transcriptStager(db)!;
    await db.transaction(async () => {
      await stage([
        {
          messageId: 'report',
          channelId: 'k',
          authorId: 'magpie',
          authorName: 'Magpie',
          content: '[worker w-1 interrupted] The background task “Index every recipe.” was interrupted when Magpie stopped',
          createdAt: 2,
        },
      ]);
    });
    const owed = (await db.prepare('SELECT COUNT(*) AS n FROM memory_vector_backlog').get()) as { n: number };
    assert.equal(Number(owed.n), 1, 'the report is owed its vector');
    const results = await store.search({ location: { channelId: 'k' }, query: 'interrupted recipe' });
    // With two rows BM25 says little; the cosine carries the score, owed vector or not.
    assert.equal(results[0]?.message_id, 'report', JSON.stringify(results.map((result) => [result.message_id, result.score])));
    assert.ok(results[0]!.score > 0.5, `the report keeps its evidence: ${results[0]!.score}`);
  } finally {
    await store.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
