/**
 * The physical limit of ingest on this machine: history rows plus transcript rows (with their
 * search text in FTS5 and vector backlog rows) inserted straight into a fresh Magpie database in
 * batches of 500, across 1,000 channels, with the same schema and pragmas as the bot and no
 * Magpie code in between. Ingest benchmarks print their rate next to this one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DATABASE_FILE, openDatabase } from '../src/storage/database.js';
import { startWalCheckpointer } from '../src/storage/wal-checkpointer.js';
import type { SerialClient } from '../src/storage/serial-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { floorRow } from './floor-rows.js';

export async function measureSqliteInsertRate(options: {
  rows: number;
  channels: number;
  batch: number;
  /** Messages already archived (vectors done) before the clock starts: a store that has been in use. */
  archived?: number;
}): Promise<number> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-raw-'));
  const client = (await openDatabase(dataDir, ALL_MIGRATIONS)) as SerialClient;
  // Checkpoints in a thread of their own, as the bot runs them (its writer's own are the fallback).
  const checkpointer = startWalCheckpointer(path.join(dataDir, DATABASE_FILE));
  // The synchronous connection underneath: the floor is better-sqlite3 itself, no promise per row.
  const db = client.connection;
  try {
    const history = db.prepare(
      `INSERT INTO history_entries (channel_id, seq, message_id, kind, role, author_id, author_name, content, created_at, tokens, turn_id, archived)
       VALUES (?, ?, ?, 'message', 'user', ?, 'alice', ?, ?, 20, ?, 1)`,
    );
    const item = db.prepare(
      `INSERT INTO memory_items (kind, content, scope, index_key, channel_id, message_id, author_id, author_name, content_hash, fts_tags, fts_text, created_at, updated_at)
       VALUES ('transcript', ?, 'channel', ?, ?, ?, 'u1', 'alice', ?, ?, ?, ?, ?)`,
    );
    const backlog = db.prepare('INSERT INTO memory_vector_backlog (item_rowid, index_key) VALUES (?, ?)');
    // Made before the clock starts, search text included: tokenizing is Magpie's work, which the
    // gateway path pays for on its own; the floor is what SQLite takes for the same rows.
    const archived = options.archived ?? 0;
    const rows = Array.from({ length: archived + options.rows }, (_, index) => floorRow(index, options.channels));
    const insert = (from: number, to: number, batch: number, owesVector: boolean): void => {
      for (let first = from; first < to; first += batch) {
        db.transaction(() => {
          for (const row of rows.slice(first, Math.min(to, first + batch))) {
            const now = Date.now();
            history.run(row.channel, row.seq, row.messageId, 'u1', row.text, now, row.turn);
            const info = item.run(row.text, `c:${row.channel}`, row.channel, row.messageId, row.hash, row.tags, row.searchText, now, now);
            if (owesVector) backlog.run(Number(info.lastInsertRowid), `c:${row.channel}`);
          }
        })();
      }
    };
    insert(0, archived, 5_000, false);
    const started = process.hrtime.bigint();
    insert(archived, rows.length, options.batch, true);
    return options.rows / (Number(process.hrtime.bigint() - started) / 1e9);
  } finally {
    await checkpointer.close();
    await client.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
