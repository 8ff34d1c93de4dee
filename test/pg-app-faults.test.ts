/**
 * The whole app on PostgreSQL while the database goes away, through a TCP proxy in the test: a
 * server that stops answering leaves the event loop free and the app unready, with its state on
 * `/healthz`; connections the server terminates are replaced and the locks taken back; nothing
 * acknowledged is lost.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { databaseProblem, storageState } from '../src/metrics/index.js';
import { withStorageRetry } from '../src/storage/storage-retry.js';
import { userMessage } from './compaction-support.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';
import { startDelayedPostgres, type DelayedPostgres } from './support/tcp-delay-proxy.js';
import { waitUntil } from './support/wait-until.js';

const RUN_PREFIX = `t${process.env.MAGPIE_TEST_RUN ?? ''}`;

interface Rig {
  app: MagpieApp;
  proxy: DelayedPostgres;
  events: MagpieEvent[];
  schema: string;
  close(): Promise<void>;
}

async function openRig(command: string): Promise<Rig> {
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 0);
  const schema = freshSchema(RUN_PREFIX);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-pg-app-faults-'));
  const stream = new EventStream();
  const events: MagpieEvent[] = [];
  stream.subscribe((event) => events.push(event));
  const app = await openApp({
    config: {
      ...DEFAULTS,
      memory: { ...DEFAULTS.memory, dataDir },
      // Short deadlines: a hung server costs a second or two here, not five.
      storage: { ...DEFAULTS.storage, backend: 'postgres', schema, statementTimeoutMs: 800, connectTimeoutMs: 1_000 },
    },
    env: { MAGPIE_DATABASE_URL: proxy.url },
    events: stream,
    command,
  });
  return {
    app,
    proxy,
    events,
    schema,
    async close() {
      proxy.proxy.resume();
      await app.close();
      await proxy.close();
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Ingests as the Discord adapter does: a failed write is retried with backoff while storage is unhealthy. */
function ingestRetrying(app: MagpieApp, index: number): Promise<unknown> {
  return withStorageRetry(() => app.runtime.ingest(userMessage('c1', index)), { health: app.storage, dataDir: app.dataDir, delaysMs: [100, 200, 400, 800, 1_000, 1_000, 1_000, 1_000] });
}

async function storedIds(schema: string): Promise<string[]> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    const result = await admin.query(`SELECT message_id FROM "${schema}".history_entries WHERE channel_id = 'c1' AND kind = 'message' ORDER BY seq`);
    return result.rows.map((row: { message_id: string }) => row.message_id);
  } finally {
    await admin.end();
  }
}

test('a server that stops answering: the loop stays free, the app is unready and says why, then it recovers with nothing lost', async (t) => {
  if (!(await requirePostgres(t))) return;
  const rig = await openRig('magpie app-fault hang');
  try {
    for (let index = 0; index < 5; index += 1) await rig.app.runtime.ingest(userMessage('c1', index));
    assert.equal(databaseProblem(rig.app), undefined);
    assert.match(storageState(rig.app), /^postgres up, writer lock held$/);

    rig.proxy.proxy.pause();
    // A 100 ms timer keeps firing while the write waits out its deadline.
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 100);
    const started = Date.now();
    const pending = ingestRetrying(rig.app, 5);
    await waitUntil(() => databaseProblem(rig.app) !== undefined, 'the app to report the store unready', 10_000);
    const waited = Date.now() - started;
    clearInterval(timer);
    assert.ok(ticks >= Math.floor(waited / 100) - 3, `the loop kept its timers: ${ticks} ticks in ${waited} ms`);
    assert.match(databaseProblem(rig.app)!, /PostgreSQL (reconnecting|down)|storage failing/);
    assert.match(storageState(rig.app), /postgres (reconnecting|down)|writes failing/);

    rig.proxy.proxy.resume();
    await pending;
    await ingestRetrying(rig.app, 6);
    assert.deepEqual(await storedIds(rig.schema), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6']);
    assert.equal(databaseProblem(rig.app), undefined);
    assert.ok(rig.events.some((event) => event.type === 'storage_connection_lost'));
    assert.ok(rig.events.some((event) => event.type === 'storage_connection_restored'));
  } finally {
    await rig.close();
  }
});

test('connections the server terminates are replaced and the writer lock is taken back; nothing acknowledged is lost', async (t) => {
  if (!(await requirePostgres(t))) return;
  const rig = await openRig('magpie app-fault terminate');
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    for (let index = 0; index < 5; index += 1) await rig.app.runtime.ingest(userMessage('c1', index));
    const ended = await admin.query(`SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE application_name LIKE 'magpie app-fault terminate%'`);
    assert.ok(ended.rows.length >= 2, 'the pool and the lock session were both ended');
    for (let index = 5; index < 10; index += 1) await ingestRetrying(rig.app, index);
    // The lock session reconnects with backoff and takes the writer lock back.
    await waitUntil(() => rig.app.connection?.locksHeld() === true, 'the writer lock to be held again', 15_000);
    const held = await admin.query(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND a.application_name LIKE 'magpie app-fault terminate%'`,
    );
    assert.ok((held.rows[0] as { n: number }).n >= 1, 'the writer lock is held again on the new session');
    // The lock session's own loss and return reach the log, as the pool's do.
    const lockEvents = rig.events.filter((event) => event.connection === 'locks').map((event) => event.type);
    assert.deepEqual(lockEvents.slice(0, 2), ['storage_connection_lost', 'storage_connection_restored']);
    assert.equal(rig.events.find((event) => event.connection === 'locks' && event.type === 'storage_connection_restored')?.writer_lock_held, true);
    assert.deepEqual(await storedIds(rig.schema), Array.from({ length: 10 }, (_, index) => `m${index}`));
    assert.equal(rig.events.filter((event) => event.type === 'storage_writer_lost').length, 0);
  } finally {
    await admin.end();
    await rig.close();
  }
});

test('every connection cut mid-ingest (a crashed server, a dropped link): each acknowledged message is stored once, in order', async (t) => {
  if (!(await requirePostgres(t))) return;
  const rig = await openRig('magpie app-fault cut');
  try {
    const acknowledged: string[] = [];
    const failed: string[] = [];
    const writes: Array<Promise<unknown>> = [];
    for (let index = 0; index < 60; index += 1) {
      const id = `m${index}`;
      writes.push(
        ingestRetrying(rig.app, index).then(
          () => acknowledged.push(id),
          () => failed.push(id),
        ),
      );
      if (index === 30) rig.proxy.proxy.cutAll();
      // A few messages per turn of the loop, so the cut falls inside group commits.
      if (index % 5 === 4) await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(writes);
    assert.deepEqual(failed, [], 'the retries outlasted the reconnect');
    const stored = await storedIds(rig.schema);
    assert.equal(new Set(stored).size, stored.length, 'nothing stored twice');
    for (const id of acknowledged) assert.ok(stored.includes(id), `${id} was acknowledged and is stored`);
    assert.deepEqual((await rig.app.runtime.liveContext('c1')).entries.map((entry) => entry.messageId), stored, 'memory and database agree');
  } finally {
    await rig.close();
  }
});
