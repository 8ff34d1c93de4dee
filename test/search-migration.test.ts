/**
 * A store written before search made its own tokens is brought up to date: every existing row
 * gets its search tokens and the full-text index is rebuilt, on SQLite and on PostgreSQL.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore } from '../src/memory/index.js';
import { channelKey, ftsTags } from '../src/memory/scope.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { openMigratedTo } from './support/storage.js';

const BEFORE = ALL_MIGRATIONS.filter((migration) => migration.name !== 'memory-003-search-text');


test('rows written before the search tokens existed are found by them after the upgrade', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  try {
    const old = await openMigratedTo(dir, BEFORE, 'search-migration test');
    const insert = old.db.prepare(
      `INSERT INTO memory_items (kind, content, scope, index_key, channel_id, message_id, author_id, author_name, content_hash, fts_tags, created_at, updated_at)
       VALUES ('transcript', ?, 'channel', ?, 'c1', ?, 'a', 'Lin', ?, ?, ?, ?)`,
    );
    const lines = ['Lin: 我们下周三在上海办公室开会', 'Lin: I filed BILL-4821 for the invoice', 'Lin: lunch at noon?'];
    for (const [index, content] of lines.entries()) {
      await insert.run(content, channelKey('c1'), `m${index}`, `hash-${index}`, ftsTags({ indexKey: channelKey('c1'), kind: 'transcript' }), index, index);
    }
    await old.close();

    const upgraded = await openMigratedTo(dir, ALL_MIGRATIONS, 'search-migration test');
    const store = await openMemoryStore({ db: upgraded.db, dataDir: dir, settings: DEFAULTS.memory });
    try {
      const first = async (query: string) => (await store.search({ location: { channelId: 'c1' }, query, limit: 3 }))[0]?.message_id;
      assert.equal(await first('上海'), 'm0');
      assert.equal(await first('BILL 4821'), 'm1');
      assert.equal(await first('lunch'), 'm2');
    } finally {
      await store.close();
      await upgraded.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
