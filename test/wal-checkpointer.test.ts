/**
 * WAL checkpoints from a thread of their own: the writer's pages reach the main file without the
 * writer checkpointing, closing still leaves a rollback-journal database, and a thread that
 * cannot checkpoint says so once while the writer carries on.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { DATABASE_FILE, openDatabase } from '../src/storage/database.js';
import { openDataDirForWriting } from '../src/storage/data-dir.js';
import { startWalCheckpointer } from '../src/storage/wal-checkpointer.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-checkpoint-'));
after(() => rmSync(root, { recursive: true, force: true }));

async function until(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('the thread copies committed pages into the main file; the writer never checkpoints', async () => {
  const dataDir = path.join(root, 'copies');
  const failures: string[] = [];
  const writable = await openDataDirForWriting(dataDir, ALL_MIGRATIONS, {
    command: 'test',
    checkpointInBackground: true,
    onCheckpointFailure: (error) => failures.push(error),
  });
  const file = path.join(dataDir, DATABASE_FILE);
  try {
    // Far below the writer's own threshold (10,000 pages): only the thread can copy these.
    await writable.db.exec('CREATE TABLE filler (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    const before = statSync(file).size;
    const body = 'x'.repeat(1_000);
    for (let batch = 0; batch < 10; batch += 1) {
      await writable.db.transaction(async () => {
        for (let row = 0; row < 200; row += 1) await writable.db.prepare('INSERT INTO filler (body) VALUES (?)').run(body);
      });
    }
    const checkpointer = writable.checkpointer!;
    await until(() => statSync(file).size >= before + 2_000_000, 'the main file to hold the rows');
    // The thread's report follows its checkpoint.
    await until(() => checkpointer.stats().framesCopied >= 500, 'the report of the copied frames');
    const stats = checkpointer.stats();
    assert.ok(stats.checkpoints >= 1 && stats.framesCopied >= 500, JSON.stringify(stats));
    assert.deepEqual(failures, []);
    assert.equal(((await writable.db.prepare('SELECT COUNT(*) AS n FROM filler').get()) as { n: number }).n, 2_000);
  } finally {
    await writable.close();
  }
  // Closed as before: rollback-journal mode, no WAL left beside the file, every row there.
  assert.equal(existsSync(`${file}-wal`), false);
  const reader = await openDatabase(dataDir, ALL_MIGRATIONS, { readOnly: true });
  try {
    assert.equal(((await reader.prepare('SELECT COUNT(*) AS n FROM filler').get()) as { n: number }).n, 2_000);
  } finally {
    await reader.close();
  }
});

test('a thread that cannot checkpoint reports it once, and closing still ends it', async () => {
  const file = path.join(root, 'not-a-database.sqlite');
  writeFileSync(file, 'this is a text file, not SQLite '.repeat(200));
  writeFileSync(`${file}-wal`, 'and neither is this');
  const failures: string[] = [];
  const checkpointer = startWalCheckpointer(file, { intervalMs: 10, onFailure: (error) => failures.push(error) });
  try {
    await until(() => checkpointer.stats().failures >= 3, 'several failed ticks');
    assert.equal(failures.length, 1, failures.join('; '));
    assert.match(failures[0]!, /not a database/);
    assert.equal(checkpointer.stats().checkpoints, 0);
  } finally {
    await checkpointer.close();
  }
  // Closing twice is harmless.
  await checkpointer.close();
});
