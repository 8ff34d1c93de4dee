/**
 * The whole app on PostgreSQL while the database goes away, through a TCP proxy in the test: a
 * server that stops answering leaves the event loop free and the app unready, with its state on
 * `/healthz`; connections the server terminates are replaced and the locks taken back; nothing
 * acknowledged is lost. When only the lock session goes, a message arriving meanwhile waits for it
 * and lands as soon as the lock is back, and `magpie start` stops within its grace even while the
 * lock session cannot come back.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
import { startDelayedPostgres, type DelayedPostgres, type StartupParameters } from './support/tcp-delay-proxy.js';
import { waitUntil } from './support/wait-until.js';
import { startFakeDiscord } from './fakes/fake-discord.js';
import { startMagpie } from './support/magpie-process.js';

const RUN_PREFIX = `t${process.env.MAGPIE_TEST_RUN ?? ''}`;

interface Rig {
  app: MagpieApp;
  proxy: DelayedPostgres;
  events: MagpieEvent[];
  schema: string;
  close(): Promise<void>;
}

async function openRig(command: string, storage: { statementTimeoutMs?: number; connectTimeoutMs?: number } = {}): Promise<Rig> {
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
      storage: { ...DEFAULTS.storage, backend: 'postgres', schema, statementTimeoutMs: 800, connectTimeoutMs: 1_000, ...storage },
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

/** The lock session of `command` (its application name), as the proxy and pg_stat_activity see it. */
function lockSessionOf(command: string): (parameters: StartupParameters) => boolean {
  return (parameters) => parameters.application_name === `${command} locks`;
}

/** Ends the lock session of `command` on the server, as an operator's pg_terminate_backend would. */
async function terminateLockSession(admin: pg.Client, command: string, proxy: DelayedPostgres): Promise<void> {
  // Through this test's proxy: another test's process may run under the same name meanwhile.
  const found = await admin.query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND client_port = ANY($2::int[])`, [
    `${command} locks`,
    proxy.proxy.serverPorts(lockSessionOf(command)),
  ]);
  assert.equal(found.rows.length, 1, 'one lock session');
  await admin.query('SELECT pg_terminate_backend($1)', [(found.rows[0] as { pid: number }).pid]);
}

/**
 * A message arriving while the lock session is away, through the Discord adapter's retry path
 * (`withStorageRetry` with its default backoff); what happens is written to `timeline`.
 */
function ingestNoting(rig: Rig, index: number, timeline: string[]): Promise<unknown> {
  return withStorageRetry(() => rig.app.runtime.ingest(userMessage('c1', index)), {
    health: rig.app.storage,
    dataDir: rig.app.dataDir,
    onRetry: (attempt) => timeline.push(`retry ${attempt}`),
  }).then(() => timeline.push(`stored m${index}`));
}

function noteLockEvents(rig: Rig, timeline: string[]): void {
  rig.app.events.subscribe((event) => {
    if (event.connection === 'locks') timeline.push(`${event.type === 'storage_connection_lost' ? 'lock lost' : 'lock back'}`);
    if (event.type === 'ingest_failed' || event.type === 'storage_writer_lost') timeline.push(event.type);
  });
}

test('the lock session terminated: a message arriving meanwhile waits for the lock and lands once it is back, with no failure or retry', async (t) => {
  if (!(await requirePostgres(t))) return;
  // The default deadlines, as a deployment has them.
  const command = 'magpie app-fault lock blip';
  const rig = await openRig(command, { statementTimeoutMs: DEFAULTS.storage.statementTimeoutMs, connectTimeoutMs: DEFAULTS.storage.connectTimeoutMs });
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    for (let index = 0; index < 3; index += 1) await rig.app.runtime.ingest(userMessage('c1', index));
    const timeline: string[] = [];
    noteLockEvents(rig, timeline);
    const killed = Date.now();
    await terminateLockSession(admin, command, rig.proxy);
    await waitUntil(() => timeline.includes('lock lost'), 'the loss to be noticed');
    await ingestNoting(rig, 3, timeline);
    const landed = Date.now() - killed;
    assert.deepEqual(timeline, ['lock lost', 'lock back', 'stored m3'], 'the write waited for the lock, then went, with no retry');
    // A blip is a blip: far within the statement deadline a write may wait for the lock.
    assert.ok(landed < 5_000, `stored ${landed} ms after the kill`);
    assert.equal(rig.app.connection?.locksHeld(), true);
    assert.deepEqual(await storedIds(rig.schema), ['m0', 'm1', 'm2', 'm3']);
  } finally {
    await admin.end();
    await rig.close();
  }
});

test('the lock session cut and unable to reconnect for a while: it is back within about a second once it can be, and the message that waited lands then', async (t) => {
  if (!(await requirePostgres(t))) return;
  const command = 'magpie app-fault lock outage';
  const rig = await openRig(command, { statementTimeoutMs: DEFAULTS.storage.statementTimeoutMs, connectTimeoutMs: DEFAULTS.storage.connectTimeoutMs });
  try {
    for (let index = 0; index < 3; index += 1) await rig.app.runtime.ingest(userMessage('c1', index));
    const timeline: string[] = [];
    noteLockEvents(rig, timeline);
    // The link of the lock session fails, and keeps failing for four seconds; the pool's is fine.
    rig.proxy.proxy.refuse(lockSessionOf(command));
    assert.equal(rig.proxy.proxy.cut(lockSessionOf(command)), 1);
    await waitUntil(() => timeline.includes('lock lost'), 'the loss to be noticed');
    const pending = ingestNoting(rig, 3, timeline);
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    assert.deepEqual(timeline, ['lock lost'], 'the write waits; it has not failed');
    assert.equal(rig.app.connection?.locksHeld(), false);
    const back = Date.now();
    rig.proxy.proxy.refuse(undefined);
    await waitUntil(() => timeline.includes('lock back'), 'the lock session to be back', 10_000);
    const restoredAfter = Date.now() - back;
    await pending;
    // A backoff grown to several seconds would leave the store unwritable that much longer.
    assert.ok(restoredAfter < 2_000, `the lock came back ${restoredAfter} ms after it could`);
    assert.deepEqual(timeline, ['lock lost', 'lock back', 'stored m3'], 'no failure, no retry: the write went once the lock was back');
    assert.equal(rig.app.connection?.locksHeld(), true);
    assert.deepEqual(await storedIds(rig.schema), ['m0', 'm1', 'm2', 'm3']);
  } finally {
    await rig.close();
  }
});

test('closing the app while the lock session is away (or silent) does not wait for it', async (t) => {
  if (!(await requirePostgres(t))) return;
  for (const fault of ['away', 'silent'] as const) {
    const command = `magpie app-fault lock close ${fault}`;
    const rig = await openRig(command, { statementTimeoutMs: DEFAULTS.storage.statementTimeoutMs, connectTimeoutMs: DEFAULTS.storage.connectTimeoutMs });
    try {
      await rig.app.runtime.ingest(userMessage('c1', 0));
      let pending: Promise<unknown> | undefined;
      if (fault === 'away') {
        rig.proxy.proxy.refuse(lockSessionOf(command));
        rig.proxy.proxy.cut(lockSessionOf(command));
        await waitUntil(() => rig.app.connection?.locksHeld() === false, 'the loss to be noticed');
        // A write waiting for the lock when the close begins fails then, unacknowledged.
        pending = rig.app.runtime.ingest(userMessage('c1', 1)).then(
          () => 'stored',
          (error: { code?: string }) => error.code,
        );
      } else {
        // The lock session's peer stops answering: closing must not wait out its reply deadline.
        rig.proxy.proxy.stallOpen(lockSessionOf(command));
      }
      const started = Date.now();
      await rig.app.close();
      const took = Date.now() - started;
      assert.ok(took < DEFAULTS.discord.shutdownGraceMs, `${fault}: closed in ${took} ms`);
      if (pending) assert.equal(await pending, 'storage_writes_held');
    } finally {
      await rig.close();
    }
  }
});

test('magpie start stops within its grace on SIGTERM while its lock session is reconnecting', async (t) => {
  if (!(await requirePostgres(t))) return;
  const alice = '100000000000000001';
  const general = '700000000000000001';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-pg-lock-stop-'));
  const discord = await startFakeDiscord({ users: [{ id: alice, username: 'alice' }], channels: [{ id: general, name: 'general', type: 0 }] });
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 0);
  const schema = freshSchema(RUN_PREFIX);
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  const graceMs = 5_000;
  const configFile = path.join(dir, 'magpie.toml');
  writeFileSync(
    configFile,
    [
      '[memory]',
      `data_dir = "${path.join(dir, 'data')}"`,
      '[discord]',
      `shutdown_grace_ms = ${graceMs}`,
      '[metrics]',
      'listen = "127.0.0.1:0"',
      '',
    ].join('\n'),
  );
  const run = startMagpie(['start', '--config', configFile], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: dir,
      DISCORD_TOKEN: 'test-token',
      MAGPIE_DISCORD_API: discord.restApi,
      MAGPIE_STORAGE_BACKEND: 'postgres',
      MAGPIE_DATABASE_URL: proxy.url,
      MAGPIE_STORAGE_SCHEMA: schema,
    },
  });
  try {
    await discord.waitForReady(20_000);
    await waitUntil(() => run.output.stdout.includes('magpie is running'), 'the bot to run', 20_000);
    discord.sendMessage({ channelId: general, authorId: alice, content: 'before the outage' });
    await waitUntil(async () => (await admin.query(`SELECT count(*)::int AS n FROM "${schema}".history_entries WHERE kind = 'message'`)).rows[0].n === 1, 'the first message stored');
    // The lock session is terminated and cannot come back; a message arrives meanwhile and waits.
    proxy.proxy.refuse(lockSessionOf('magpie start'));
    await terminateLockSession(admin, 'magpie start', proxy);
    await waitUntil(() => run.output.stdout.includes('"connection":"locks"'), 'the loss to be logged');
    discord.sendMessage({ channelId: general, authorId: alice, content: 'during the outage' });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const signalled = Date.now();
    run.child.kill('SIGTERM');
    const code = await Promise.race([run.exited, new Promise<'hung'>((resolve) => setTimeout(resolve, 30_000, 'hung').unref())]);
    const took = Date.now() - signalled;
    if (code === 'hung') run.child.kill('SIGKILL');
    assert.equal(code, 0, run.output.stderr);
    assert.ok(took < graceMs, `stopped ${took} ms after SIGTERM (grace ${graceMs} ms)`);
    assert.match(run.output.stdout, /"event":"stopped"/);
    assert.doesNotMatch(run.output.stdout, /storage_writer_lost/);
  } finally {
    if (run.child.exitCode === null) run.child.kill('SIGKILL');
    await discord.close();
    await proxy.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  }
});
