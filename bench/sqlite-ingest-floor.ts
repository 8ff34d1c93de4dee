/**
 * The physical limit of ingest on this machine: history rows plus transcript rows (with their
 * FTS5 entries and vector backlog rows) inserted straight into a fresh Magpie database in
 * batches of 500, across 1,000 channels, with the same schema and pragmas as the bot and no
 * Magpie code in between. Ingest benchmarks print their rate next to this one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../src/storage/database.js';
import type { SerialClient } from '../src/storage/serial-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';

export async function measureSqliteInsertRate(options: { rows: number; channels: number; batch: number }): Promise<number> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-raw-'));
  const client = (await openDatabase(dataDir, ALL_MIGRATIONS)) as SerialClient;
  // The synchronous connection underneath: the floor is better-sqlite3 itself, no promise per row.
  const db = client.connection;
  try {
    const history = db.prepare(
      `INSERT INTO history_entries (channel_id, seq, message_id, kind, role, author_id, author_name, content, created_at, tokens, turn_id, archived)
       VALUES (?, ?, ?, 'message', 'user', ?, 'alice', ?, ?, 20, ?, 1)`,
    );
    const item = db.prepare(
      `INSERT INTO memory_items (kind, content, scope, index_key, channel_id, message_id, author_id, author_name, content_hash, fts_tags, created_at, updated_at)
       VALUES ('transcript', ?, 'channel', ?, ?, ?, 'u1', 'alice', ?, ?, ?, ?)`,
    );
    const backlog = db.prepare('INSERT INTO memory_vector_backlog (item_rowid, index_key) VALUES (?, ?)');
    const started = process.hrtime.bigint();
    for (let first = 0; first < options.rows; first += options.batch) {
      db.transaction(() => {
        for (let index = first; index < Math.min(options.rows, first + options.batch); index += 1) {
          const channel = (700_000_000_000_000_000n + BigInt(index % options.channels)).toString();
          const text = `alice: message ${index}: the watering rota moves to thursdays from next week`;
          const now = Date.now();
          history.run(channel, Math.floor(index / options.channels) + 1, `raw-${index}`, 'u1', text, now, index + 1);
          const info = item.run(text, `c:${channel}`, channel, `raw-${index}`, `h${index}`, `k${index % options.channels} kt`, now, now);
          backlog.run(Number(info.lastInsertRowid), `c:${channel}`);
        }
      })();
    }
    return options.rows / (Number(process.hrtime.bigint() - started) / 1e9);
  } finally {
    await client.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
