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
import { openApp } from '../src/app/index.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { MagpieError } from '../src/common/errors.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { runMagpie } from './support/magpie-process.js';
import { appEnv, openTestDatabase, TEST_STORAGE, withTestStorage } from './support/storage.js';

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

test('a start that applies schema steps says so before and after (what a long upgrade waits on); a start with none pending says nothing', async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-version-'));
  const dataDir = path.join(root, 'data');
  try {
    const config = withTestStorage({ ...DEFAULTS, memory: { ...DEFAULTS.memory, dataDir } });
    const open = async () => {
      const stream = new EventStream();
      const seen: MagpieEvent[] = [];
      stream.subscribe((event) => seen.push(event));
      const app = await openApp({ config, events: stream, env: appEnv() });
      await app.close();
      return seen.filter((event) => event.type.startsWith('schema_migration_'));
    };
    const first = await open();
    assert.deepEqual(
      first.map(({ type, steps, first_step, last_step }) => ({ type, steps, first_step, last_step })),
      [
        { type: 'schema_migration_started', steps: ALL_MIGRATIONS.length, first_step: ALL_MIGRATIONS[0]!.name, last_step: ALL_MIGRATIONS.at(-1)!.name },
        { type: 'schema_migration_finished', steps: ALL_MIGRATIONS.length, first_step: undefined, last_step: undefined },
      ],
    );
    assert.equal(first[0]!.backend, TEST_STORAGE);
    assert.equal(typeof first[1]!.duration_ms, 'number');
    assert.deepEqual(await open(), [], 'nothing pending: no line');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
