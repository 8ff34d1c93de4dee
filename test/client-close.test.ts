/**
 * A closed store client leaves nothing behind that the rest of the process keeps paying for.
 * Each client tracks its open transaction in an AsyncLocalStorage; Node (20) keeps every such
 * storage that ever ran on a list and visits the whole list for every promise created anywhere,
 * so a process that opens clients one after another (the benchmark, the tests, a bot that
 * reconnects) got slower with each one until closing took the client off the list.
 */
import assert from 'node:assert/strict';
import { AsyncLocalStorage, executionAsyncResource } from 'node:async_hooks';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { openTestDatabase } from './support/storage.js';

const probe = new AsyncLocalStorage<string>();

/** How many storages a new promise is handed: one slot per live AsyncLocalStorage. */
function storagesCarried(): Promise<number> {
  return probe.run('probe', async () => {
    await null;
    return Object.getOwnPropertySymbols(executionAsyncResource()).length;
  });
}

async function openUseAndClose(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-client-close-'));
  try {
    const db = await openTestDatabase(dir);
    await db.transaction(async () => {
      await db.prepare('SELECT 1').get();
    });
    await db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('clients opened and closed one after another do not pile up on every promise', async () => {
  await openUseAndClose();
  const before = await storagesCarried();
  for (let round = 0; round < 4; round += 1) await openUseAndClose();
  assert.equal(await storagesCarried(), before);
});
