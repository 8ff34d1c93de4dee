/**
 * Channel view keys recorded in bursts, as a bot sees them: every channel at start and every
 * message of a channel again. Concurrent records of one channel write it once; a burst of
 * channels lands in one transaction; public threads follow their parent; a failed write is
 * reported to each caller and the next record writes it. Both backends.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelViews, UNKNOWN_VIEW, privateThreadKey } from '../src/privacy/channel-views.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { withBothBackends } from './support/both-backends.js';
import { requirePostgres } from './support/postgres-available.js';

async function exercise(db: SqlClient, label: string): Promise<void> {
  const views = new ChannelViews(db);
  const guildId = '900';
  // A burst: 200 channels, each recorded five times at once (start + four messages).
  const channels = Array.from({ length: 200 }, (_, index) => `c${index}`);
  const results = await Promise.all(
    channels.flatMap((channelId) => Array.from({ length: 5 }, () => views.record({ channelId, guildId, viewKey: 'view:open' }))),
  );
  assert.equal(results.filter(Boolean).length, 200, `${label}: each channel written once, the other records find it done`);
  const stored = (await db.prepare('SELECT channel_id, view_key FROM channel_views ORDER BY channel_id').all()) as Array<{ channel_id: string; view_key: string }>;
  assert.equal(stored.length, 200);
  assert.ok(stored.every((row) => row.view_key === 'view:open'));

  // Threads: a public one follows its parent's new key, a private one keeps its own.
  await views.record({ channelId: 'pub', guildId, parentId: 'c1', viewKey: 'view:open' });
  await views.record({ channelId: 'priv', guildId, parentId: 'c1', viewKey: privateThreadKey('priv') });
  assert.equal(await views.record({ channelId: 'c1', guildId, viewKey: 'view:staff' }), true);
  assert.equal(await views.keyOf('pub'), 'view:staff', `${label}: the public thread follows`);
  assert.equal(await views.keyOf('priv'), privateThreadKey('priv'));
  const fresh = new ChannelViews(db);
  assert.equal(await fresh.keyOf('pub'), 'view:staff', `${label}: as stored`);
  assert.equal(await fresh.keyOf('never-seen'), UNKNOWN_VIEW);
  // An unknown channel is remembered as unknown until it is recorded.
  assert.equal(await fresh.record({ channelId: 'never-seen', guildId, viewKey: 'view:open' }), true);
  assert.equal(await fresh.keyOf('never-seen'), 'view:open');
}

test('channel views: bursts of records on SQLite and PostgreSQL', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withBothBackends('channel-views test', async (sqlite, postgres) => {
    await exercise(sqlite.db, 'sqlite');
    await exercise(postgres.db, 'postgres');
  });
});

test('channel views: a write that fails rejects every record in its batch; the next record writes', async () => {
  const { openDatabase } = await import('../src/storage/database.js');
  const { ALL_MIGRATIONS } = await import('../src/app/migrations.js');
  const { withTempDir } = await import('./support/both-backends.js');
  await withTempDir(async (dir) => {
    const db = await openDatabase(dir, ALL_MIGRATIONS);
    try {
      const views = new ChannelViews(db);
      await db.exec('CREATE TRIGGER refuse BEFORE INSERT ON channel_views BEGIN SELECT RAISE(ABORT, \'disk says no\'); END');
      const outcomes = await Promise.allSettled([views.record({ channelId: 'a', guildId: 'g', viewKey: 'k' }), views.record({ channelId: 'b', guildId: 'g', viewKey: 'k' })]);
      assert.deepEqual(outcomes.map((outcome) => outcome.status), ['rejected', 'rejected']);
      assert.match(String((outcomes[0] as PromiseRejectedResult).reason), /disk says no/);
      await db.exec('DROP TRIGGER refuse');
      assert.equal(await views.record({ channelId: 'a', guildId: 'g', viewKey: 'k' }), true, 'recorded once the store takes writes');
      assert.equal(await new ChannelViews(db).keyOf('a'), 'k');
    } finally {
      await db.close();
    }
  });
});
