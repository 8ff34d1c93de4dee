/**
 * The message-id indexes of history and the transcript archive lead with the message id
 * (migrations history-003 and memory-007), so that group commits append to them. A store written
 * before keeps every row and the same rules after the upgrade: a message id is held once per
 * channel, and the same id in another channel (replayed transcripts reuse ids) is a message of
 * its own. On SQLite and on PostgreSQL.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { HistoryStore } from '../src/channel/history-store.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { HistoryEntry } from '../src/context/types.js';
import { openMemoryStore } from '../src/memory/index.js';
import type { SqlClient } from '../src/storage/database.js';
import { openMigratedTo, TEST_STORAGE } from './support/storage.js';

const NEW_STEPS = new Set(['history-003-message-id-first', 'memory-007-message-id-first']);
const BEFORE = ALL_MIGRATIONS.filter((migration) => !NEW_STEPS.has(migration.name));


function message(channelId: string, seq: number, messageId: string): HistoryEntry {
  return {
    seq,
    channelId,
    messageId,
    kind: 'message',
    role: 'user',
    authorId: 'u1',
    authorName: 'Lin',
    content: `message ${messageId} in ${channelId}`,
    createdAt: 1_700_000_000_000 + seq,
    tokens: 10,
    turnId: seq,
  };
}

/** The columns of an index, in order, as the database describes it. */
async function indexColumns(db: SqlClient, name: string): Promise<string[]> {
  if (TEST_STORAGE === 'postgres') {
    const row = (await db.prepare('SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = ?').get(name)) as
      | { indexdef: string }
      | undefined;
    const columns = /\(([^)]*)\)/.exec(row?.indexdef ?? '')?.[1] ?? '';
    return columns.split(',').map((column) => column.trim());
  }
  return ((await db.prepare(`SELECT name FROM pragma_index_info('${name}') ORDER BY seqno`).all()) as Array<{ name: string }>).map((row) => row.name);
}

test('an upgraded store keeps its messages, holds each id once per channel and leads its message indexes with the id', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  try {
    const old = await openMigratedTo(dir, BEFORE, 'message-id-index test');
    const oldHistory = new HistoryStore(old.db);
    for (let seq = 1; seq <= 3; seq += 1) assert.equal(await oldHistory.insert(message('c1', seq, `m${seq}`), {}), true);
    const oldMemory = await openMemoryStore({ db: old.db, dataDir: dir, settings: DEFAULTS.memory });
    await oldMemory.archiveTranscript([{ channelId: 'c1', messageId: 'm1', authorId: 'u1', authorName: 'Lin', content: 'the rota moves to thursdays', createdAt: 1 }]);
    await oldMemory.close();
    await old.close();

    const upgraded = await openMigratedTo(dir, ALL_MIGRATIONS, 'message-id-index test');
    try {
      assert.deepEqual(await indexColumns(upgraded.db, 'history_entries_message'), ['message_id', 'channel_id']);
      assert.deepEqual(await indexColumns(upgraded.db, 'memory_items_message'), ['message_id', 'channel_id']);

      const history = new HistoryStore(upgraded.db);
      assert.equal(await history.findByMessageId('c1', 'm2').then((entry) => entry?.seq), 2);
      // Held once per channel: the same id again is skipped, alone or inside a group.
      assert.equal(await history.insert(message('c1', 4, 'm2'), {}), false);
      const group = [message('c1', 4, 'm4'), message('c1', 5, 'm1')].map((entry) => ({ entry, location: {}, archived: false }));
      assert.equal(await upgraded.db.transaction(() => history.insertMany(group)), 1);
      // Another channel's m1 is a message of its own.
      assert.equal(await history.insert(message('c2', 1, 'm1'), {}), true);
      const counts = (await upgraded.db
        .prepare('SELECT channel_id, COUNT(*) AS n FROM history_entries GROUP BY channel_id ORDER BY channel_id')
        .all()) as Array<{ channel_id: string; n: number }>;
      assert.deepEqual(
        counts.map((row) => [row.channel_id, Number(row.n)]),
        [
          ['c1', 4],
          ['c2', 1],
        ],
      );

      const memory = await openMemoryStore({ db: upgraded.db, dataDir: dir, settings: DEFAULTS.memory });
      try {
        await memory.archiveTranscript([
          { channelId: 'c1', messageId: 'm1', authorId: 'u1', authorName: 'Lin', content: 'the rota moves to thursdays', createdAt: 1 },
          { channelId: 'c2', messageId: 'm1', authorId: 'u1', authorName: 'Lin', content: 'the rota moves to fridays', createdAt: 2 },
        ]);
        const archived = (await upgraded.db
          .prepare(`SELECT channel_id, content FROM memory_items WHERE kind = 'transcript' AND message_id = 'm1' ORDER BY channel_id`)
          .all()) as Array<{ channel_id: string; content: string }>;
        assert.deepEqual(
          archived.map((row) => row.channel_id),
          ['c1', 'c2'],
        );
        const found = await memory.search({ location: { channelId: 'c2' }, query: 'fridays', limit: 3 });
        assert.equal(found[0]?.message_id, 'm1');
      } finally {
        await memory.close();
      }
    } finally {
      await upgraded.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
