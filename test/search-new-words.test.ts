/**
 * A word nobody had said yet when it was first searched is found as soon as someone says it:
 * the search's cache of word counts (which only bounds a query's cost) never hides it.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore } from '../src/memory/index.js';
import { conversation } from './support/memory-store.js';
import { openTestDatabase } from './support/storage.js';

test('a word searched before it was said is found once it is', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  const db = await openTestDatabase(dataDir);
  const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
  try {
    await store.archiveTranscript(
      conversation('c1', [
        ['Ana', 'the deploy went fine'],
        ['Ben', 'lunch at noon?'],
        ['Ana', 'I filed the ticket for the printer'],
      ]),
    );
    const location = { channelId: 'c1' };
    assert.deepEqual(await store.search({ location, query: 'BILL-9931 status' }), [], 'nobody has said it yet');

    await store.archiveTranscript([
      { channelId: 'c1', messageId: 'late', authorId: 'ben', authorName: 'Ben', content: 'opened BILL-9931 for the broken invoice export', createdAt: Date.now() },
    ]);
    const found = await store.search({ location, query: 'BILL-9931 status' });
    assert.ok(found[0]?.source_ids.includes('late'), `the new message comes first; found: ${JSON.stringify(found.map((hit) => hit.source_ids))}`);
  } finally {
    await store.close();
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
