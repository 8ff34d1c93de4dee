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
import { appEnv, withTestStorage } from './support/storage.js';

const child = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'ingest-child.js');

test('every acknowledged message survives SIGKILL, in history and in memory_search', { timeout: 120_000 }, async () => {
  const dir = tempDir();
  try {
    const acknowledged: string[] = [];
    const process_ = spawn(process.execPath, [child, dir.path], { stdio: ['ignore', 'pipe', 'pipe'] });
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
});
