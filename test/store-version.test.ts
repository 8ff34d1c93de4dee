/**
 * A store a newer Magpie has migrated (steps this build does not know) is refused for writing,
 * with the steps named: this build would write tables and columns without knowing what they
 * hold. Both backends, in-process and through the CLI.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { MagpieError } from '../src/common/errors.js';
import { runMagpie } from './support/magpie-process.js';
import { openTestDatabase } from './support/storage.js';

test('a store that records a schema step this build does not know is refused for writing, naming the step', async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-version-'));
  const dir = path.join(root, 'data');
  try {
    const db = await openTestDatabase(dir);
    await db.prepare('INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)').run('history-099-future', 1);
    await db.close();

    await assert.rejects(openTestDatabase(dir), (error: unknown) => {
      assert.ok(error instanceof MagpieError);
      assert.equal(error.code, 'store_from_newer_version');
      assert.match(error.message, /migrated by a newer Magpie: .*\(history-099-future\)/);
      return true;
    });

    writeFileSync(path.join(root, 't.jsonl'), `${JSON.stringify({ id: 'a1', channel: 'c1', author: 'ana', content: 'hello' })}\n`);
    const replay = await runMagpie(['replay', 't.jsonl', '--data-dir', dir], { cwd: root, env: { PATH: process.env.PATH ?? '', HOME: root } });
    assert.notEqual(replay.code, 0);
    assert.match(replay.stderr, /newer Magpie[\s\S]*history-099-future[\s\S]*hint: run the Magpie version that wrote it/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
