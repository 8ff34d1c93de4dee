/**
 * A full disk: a real `magpie replay` on a 2 MB tmpfs stops with a clear error naming the data
 * dir and what to do (no stack trace), keeps every message it reported stored, and a rerun after
 * space is freed completes without duplicates.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { openDatabase } from '../src/storage/database.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { projectRoot, runMagpie } from './support/magpie-process.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-full-'));
const mountPoint = path.join(root, 'small-disk');
let mounted = false;
after(() => {
  if (mounted) spawnSync('umount', [mountPoint]);
  rmSync(root, { recursive: true, force: true });
});
const env = { PATH: process.env.PATH ?? '' };
const TOTAL = 400;

async function storedIds(dataDir: string): Promise<string[]> {
  const db = await openDatabase(dataDir, ALL_MIGRATIONS, { readOnly: true });
  try {
    return ((await db.prepare("SELECT message_id FROM history_entries WHERE channel_id = 'c1' ORDER BY seq").all()) as Array<{ message_id: string }>).map(
      (row) => row.message_id,
    );
  } finally {
    await db.close();
  }
}

describe('storage errors', { timeout: 300_000 }, () => {
  test('replay on a full disk: a clear error, nothing accepted is lost, a rerun completes', async (context) => {
    mkdirSync(mountPoint);
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mountPoint]);
    if (mount.status !== 0) {
      context.skip(`cannot mount a tmpfs here (${mount.stderr?.toString().trim() || 'mount failed'}); CI runs as root, where this runs`);
      return;
    }
    mounted = true;
    const transcript = path.join(root, 'big.jsonl');
    const lines = Array.from({ length: TOTAL }, (_, index) =>
      JSON.stringify({ id: `f${index}`, channel: 'c1', author: 'ann', content: `message ${index} marker w${index}w ${'lorem ipsum dolor sit amet '.repeat(30)}` }),
    );
    writeFileSync(transcript, `${lines.join('\n')}\n`);
    const dataDir = path.join(mountPoint, 'data');

    const full = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env });
    assert.equal(full.code, 1);
    assert.match(full.stderr, new RegExp(`the data directory ${dataDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is out of space \\(SQLITE_FULL`));
    assert.match(full.stderr, /hint: free space on the disk/);
    assert.doesNotMatch(full.stderr, /unexpected error|\n\s+at /, 'no stack trace');
    const summary = JSON.parse(full.stdout.trim().split('\n').at(-1)!) as { type: string; messages: number };
    assert.equal(summary.type, 'replay_summary');
    assert.ok(summary.messages > 0 && summary.messages < TOTAL, `some messages fit: ${summary.messages}`);
    assert.match(full.stderr, new RegExp(`the ${summary.messages} lines before it are stored`));
    // Exactly what was reported stored is there, in order.
    assert.deepEqual(await storedIds(dataDir), lines.slice(0, summary.messages).map((_, index) => `f${index}`));

    const grow = spawnSync('mount', ['-o', 'remount,size=64m', mountPoint]);
    assert.equal(grow.status, 0, grow.stderr?.toString());
    const rerun = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env });
    assert.equal(rerun.code, 0, rerun.stderr);
    const second = JSON.parse(rerun.stdout.trim().split('\n').at(-1)!) as { messages: number; duplicates: number };
    assert.equal(second.messages + second.duplicates, TOTAL);
    assert.equal(second.duplicates, summary.messages);
    assert.deepEqual(await storedIds(dataDir), lines.map((_, index) => `f${index}`));

    // Messages whose transcript write failed on the full disk are searchable after the rerun.
    const queries = path.join(root, 'queries.jsonl');
    writeFileSync(queries, Array.from({ length: TOTAL / 10 }, (_, step) => JSON.stringify({ id: `f${step * 10}`, channel: 'c1', query: `w${step * 10}w` })).join('\n'));
    const search = await runMagpie(['memory', 'search', '--data-dir', dataDir, '--queries', queries, '--json'], { cwd: projectRoot(), env });
    assert.equal(search.code, 0, search.stderr);
    for (const line of search.stdout.trim().split('\n')) {
      const answer = JSON.parse(line) as { id: string; results: Array<{ source_ids: string[] }> };
      assert.ok(answer.results.some((result) => result.source_ids.includes(answer.id)), `${answer.id} is searchable`);
    }
  });
});
