/**
 * Group commit does not weaken durability: a message whose ingest resolved survives `kill -9`
 * of the process, in history and in the searchable archive (full text at once; its vector may
 * lag, and search covers the lag by an exact scan).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HistoryStore } from '../src/channel/history-store.js';
import { openApp } from '../src/app/index.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { tempDir } from './compaction-support.js';
import { appEnv, TEST_STORAGE, withTestStorage } from './support/storage.js';

const child = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'ingest-child.js');

// On SQLite both ways a group can commit: on the writer thread and on the event loop.
for (const writerThread of TEST_STORAGE === 'sqlite' ? (['on', 'off'] as const) : (['auto'] as const)) {
  test(`every acknowledged message survives SIGKILL, in history and in memory_search (writer thread ${writerThread})`, { timeout: 120_000 }, () =>
    survivesSigkill(writerThread),
  );
}

async function survivesSigkill(writerThread: 'on' | 'off' | 'auto'): Promise<void> {
  const dir = tempDir();
  try {
    const acknowledged: string[] = [];
    const process_ = spawn(process.execPath, [child, dir.path, writerThread], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    process_.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    let buffered = '';
    const exited = new Promise<NodeJS.Signals | null>((resolve) => process_.on('exit', (_code, signal) => resolve(signal)));
    await new Promise<void>((resolve, reject) => {
      process_.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        acknowledged.push(...lines);
        // Killed in the middle of the stream, with writes surely in flight.
        if (acknowledged.length >= 600) resolve();
      });
      process_.on('exit', () => reject(new Error(`child exited early: ${stderr}`)));
    });
    process_.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');

    const app = await openApp({ config: withTestStorage({ ...DEFAULTS, memory: { ...DEFAULTS.memory, dataDir: dir.path } }), env: appEnv() });
    try {
      const store = new HistoryStore(app.db);
      const inHistory = new Set<string>();
      for (let channel = 0; channel < 50; channel += 1) {
        for (const entry of (await store.archive(`chan-${channel}`))) inHistory.add(entry.messageId);
      }
      const missing = acknowledged.filter((id) => !inHistory.has(id));
      assert.deepEqual(missing, [], 'no acknowledged message is missing from history');
      const transcripts = new Set(
        ((await app.db.prepare(`SELECT message_id FROM memory_items WHERE kind = 'transcript'`).all()) as Array<{ message_id: string }>).map(
          (row) => row.message_id,
        ),
      );
      assert.deepEqual(acknowledged.filter((id) => !transcripts.has(id)), [], 'every acknowledged message has its transcript row');
      // The newest acknowledged ones are the likeliest to lack a vector: each is found by its own text.
      for (const id of acknowledged.slice(-5)) {
        const index = Number(id.slice('msg-'.length));
        const results = await app.memory.search({ location: { channelId: `chan-${index % 50}`, guildId: 'g1' }, query: `marmalade${index}`, limit: 3 });
        assert.ok(results.some((result) => result.source_ids.includes(id)), `${id} is found by memory_search`);
      }
    } finally {
      await app.close();
    }
  } finally {
    dir.remove();
  }
}

test('a burst commits in groups (on SQLite, on the writer thread): every message in history, in the archive and found by search', { timeout: 120_000 }, async () => {
  const dir = tempDir();
  // Asked for: `auto` leaves the thread off on a machine of two cores.
  const config = withTestStorage({ ...DEFAULTS, storage: { ...DEFAULTS.storage, writerThread: 'on' as const }, memory: { ...DEFAULTS.memory, dataDir: dir.path } });
  const app = await openApp({ config, env: appEnv() });
  try {
    const count = 400;
    const ingest = (index: number, messageId = `burst-${index}`) =>
      app.runtime.ingest({
        messageId,
        channelId: `chan-${index % 20}`,
        guildId: 'g1',
        authorId: 'u1',
        authorName: 'alice',
        role: 'user',
        content: `burst note ${index} quince${index}`,
        createdAt: Date.now(),
      });
    await Promise.all(Array.from({ length: count }, (_, index) => ingest(index)));
    const stats = app.runtime.ingestStats();
    assert.equal(stats.writes, count);
    assert.ok(stats.largestGroup > 1, 'the burst shared commits');
    // SQLite's writer thread takes every group of more than one; PostgreSQL has none.
    if (TEST_STORAGE === 'sqlite') assert.ok(stats.whole > 0, `groups on the writer thread: ${JSON.stringify(stats)}`);
    else assert.equal(stats.whole, 0);

    const store = new HistoryStore(app.db);
    let stored = 0;
    for (let channel = 0; channel < 20; channel += 1) stored += (await store.archive(`chan-${channel}`)).length;
    assert.equal(stored, count);
    assert.equal(await app.db.prepare(`SELECT count(*) FROM memory_items WHERE kind = 'transcript'`).pluck().get(), count);
    // Every transcript row owes its vector or has it already.
    assert.equal(
      await app.db
        .prepare(
          `SELECT count(*) FROM memory_items i WHERE i.kind = 'transcript'
             AND (EXISTS (SELECT 1 FROM memory_vector_backlog b WHERE b.item_rowid = i.rowid) OR EXISTS (SELECT 1 FROM memory_vectors v WHERE v.item_rowid = i.rowid))`,
        )
        .pluck()
        .get(),
      count,
    );
    const results = await app.memory.search({ location: { channelId: 'chan-7', guildId: 'g1' }, query: 'quince387', limit: 3 });
    assert.ok(results.some((result) => result.source_ids.includes('burst-387')));
  } finally {
    await app.close();
    dir.remove();
  }
});
