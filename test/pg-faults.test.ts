/**
 * PostgreSQL going away under `PgPoolClient`, through a TCP proxy in the test: a server that
 * stops answering, connections the server terminates, connections cut mid-transaction, a COMMIT
 * whose answer never comes. The event loop stays free throughout (a 100 ms timer keeps firing),
 * every failure is a classed error the retry loop understands, and work succeeds afterwards.
 */
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { test } from 'node:test';
import pg from 'pg';
import { storageError } from '../src/storage/storage-error.js';
import { PgPoolClient } from '../src/storage/postgres/pg-pool-client.js';
import type { PgConnectionSettings } from '../src/storage/postgres/pg-settings.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';

/** Inside a PostgreSQL suite run, schemas named after the run, which its runner drops. */
const RUN_PREFIX = `t${process.env.MAGPIE_TEST_RUN ?? ''}`;
import { startDelayedPostgres, type DelayedPostgres } from './support/tcp-delay-proxy.js';

/** Short deadlines, so a test waits a second or two for a hung server, not five. */
const FAST: Partial<PgConnectionSettings> = { statementTimeoutMs: 800, queryTimeoutMs: 1_000, connectTimeoutMs: 1_000, lockTimeoutMs: 500 };

async function setUp(applicationName: string): Promise<{ sql: PgPoolClient; proxy: DelayedPostgres; cleanUp(): Promise<void> }> {
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 0);
  const schema = freshSchema(RUN_PREFIX);
  const sql = await PgPoolClient.connect({ url: proxy.url, schema, applicationName, ...FAST });
  await sql.exec('CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)');
  return {
    sql,
    proxy,
    async cleanUp() {
      proxy.proxy.resume();
      await sql.close();
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await admin.connect();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      await proxy.close();
    },
  };
}

/** Counts a 100 ms timer's ticks and the event loop's delay while `work` runs. */
async function whileTicking<T>(work: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; ticks: number; p99Ms: number; maxMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  let ticks = 0;
  const timer = setInterval(() => (ticks += 1), 100);
  const [result] = await Promise.allSettled([work()]);
  clearInterval(timer);
  histogram.disable();
  return { result: result!, ticks, p99Ms: histogram.percentile(99) / 1e6, maxMs: histogram.max / 1e6 };
}

test('a statement that never answers rejects by its deadline while the loop stays free, then work recovers', async (t) => {
  if (!(await requirePostgres(t))) return;
  const { sql, proxy, cleanUp } = await setUp('magpie fault hang');
  try {
    await sql.prepare('INSERT INTO t (v) VALUES (?)').run('before');
    proxy.proxy.pause();
    const hung = await whileTicking(() => sql.prepare('SELECT count(*) FROM t').pluck().get());
    t.diagnostic(`timer ticks while hung: ${hung.ticks}; event-loop delay p99 ${hung.p99Ms.toFixed(1)} ms, max ${hung.maxMs.toFixed(1)} ms`);
    assert.equal(hung.result.status, 'rejected');
    const error = (hung.result as PromiseRejectedResult).reason as { code?: string; retryable?: boolean };
    assert.ok(error.code === 'storage_timeout' || error.code === 'storage_connection', `a classed error, got ${String(error.code)}`);
    assert.equal(storageError('pg', error)?.retryable, true, 'the retry loop retries it');
    assert.ok(hung.ticks >= 3, 'the 100 ms timer kept firing while the statement hung');
    assert.notEqual(sql.health.state, 'up');
    assert.ok(sql.health.consecutiveFailures >= 1);
    proxy.proxy.resume();
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 1);
    await sql.prepare('INSERT INTO t (v) VALUES (?)').run('after');
    assert.equal(sql.health.state, 'up');
    assert.equal(sql.health.consecutiveFailures, 0);
  } finally {
    await cleanUp();
  }
});

test('statements issued while the server is hung all reject by their deadlines, not one after another', async (t) => {
  if (!(await requirePostgres(t))) return;
  const { sql, proxy, cleanUp } = await setUp('magpie fault hang many');
  try {
    await sql.prepare('SELECT 1').get();
    proxy.proxy.pause();
    const started = performance.now();
    const results = await Promise.allSettled(Array.from({ length: 5 }, (_, index) => sql.prepare('SELECT ?::int AS n').get(index)));
    const elapsed = performance.now() - started;
    assert.ok(results.every((result) => result.status === 'rejected'));
    // Five queued one after another would take five deadlines; side by side they take about one.
    assert.ok(elapsed < 5 * FAST.queryTimeoutMs!, `side by side: ${elapsed.toFixed(0)} ms`);
    proxy.proxy.resume();
    assert.deepEqual(await sql.prepare('SELECT ?::int AS n').get(7), { n: 7 });
  } finally {
    await cleanUp();
  }
});

test('connections the server terminates are replaced: the next statements succeed on fresh ones', async (t) => {
  if (!(await requirePostgres(t))) return;
  const { sql, cleanUp } = await setUp('magpie fault terminate');
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    // Several pooled connections, idle.
    await Promise.all(Array.from({ length: 4 }, () => sql.transaction(() => sql.prepare('SELECT pg_sleep(0.01)').get())));
    const before = (await sql.prepare('SELECT pg_backend_pid()').pluck().get()) as number;
    const killed = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'magpie fault terminate'`);
    assert.ok(killed.rowCount! >= 1);
    await sql.prepare('INSERT INTO t (v) VALUES (?)').run('after-kill');
    const after = (await sql.prepare('SELECT pg_backend_pid()').pluck().get()) as number;
    assert.notEqual(after, before);
    await sql.transaction(async () => {
      await sql.prepare('INSERT INTO t (v) VALUES (?)').run('in-tx');
    });
    assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['after-kill', 'in-tx']);
    // A transaction whose connection is terminated mid-way rejects as retryable, nothing of it kept.
    await assert.rejects(
      sql.transaction(async () => {
        await sql.prepare('INSERT INTO t (v) VALUES (?)').run('half');
        const pid = await sql.prepare('SELECT pg_backend_pid()').pluck().get();
        await admin.query('SELECT pg_terminate_backend($1, 2000)', [pid]);
        await sql.prepare('INSERT INTO t (v) VALUES (?)').run('never');
      }),
      (error: { code?: string; retryable?: boolean }) => error.code === 'storage_connection' && error.retryable === true,
    );
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 2);
    assert.equal(sql.health.state, 'up');
  } finally {
    await admin.end();
    await cleanUp();
  }
});

test('every connection cut mid-transaction: the transaction rejects, nothing half-applied, later work succeeds', async (t) => {
  if (!(await requirePostgres(t))) return;
  const { sql, proxy, cleanUp } = await setUp('magpie fault cut');
  try {
    const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
    await assert.rejects(
      sql.transaction(async () => {
        await insert.run('first');
        await insert.run('second');
        proxy.proxy.cutAll();
        await insert.run('third');
      }),
      (error: { code?: string; retryable?: boolean }) => error.code === 'storage_connection' && error.retryable === true,
    );
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 0);
    // A body that catches the lost connection still cannot commit: nothing of it was applied, and it says so.
    await assert.rejects(
      sql.transaction(async () => {
        await insert.run('first');
        proxy.proxy.cutAll();
        await insert.run('second').catch(() => undefined);
      }),
      (error: { code?: string; retryable?: boolean }) => error.code === 'storage_connection' && error.retryable === true,
    );
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 0);
    await sql.transaction(async () => {
      await insert.run('later');
    });
    assert.deepEqual(await sql.prepare('SELECT v FROM t').pluck().all(), ['later']);
  } finally {
    await cleanUp();
  }
});

test('a COMMIT (or a write outside a transaction) whose answer never comes raises commit_unknown, not retried blindly', async (t) => {
  if (!(await requirePostgres(t))) return;
  const { sql, proxy, cleanUp } = await setUp('magpie fault commit');
  try {
    const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
    let open = 0;
    await assert.rejects(
      sql.transaction(async () => {
        await insert.run('maybe');
        open = proxy.proxy.connections;
        // Everything after this (the COMMIT) goes unanswered.
        proxy.proxy.pause();
      }),
      (error: { code?: string; retryable?: boolean }) => error.code === 'storage_commit_unknown' && error.retryable === false,
    );
    // The destroyed connection takes the unsent COMMIT with it once the proxy sees it close (had
    // the proxy forwarded it first, it would have committed late: hence "unknown").
    while (proxy.proxy.connections >= open) await new Promise((resolve) => setTimeout(resolve, 5));
    proxy.proxy.resume();
    // Resolved by reading back: here the COMMIT never reached the server, so the row is not there.
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 0);
    // A write outside a transaction commits on its own: no answer leaves it just as unknown.
    await insert.run('warm');
    await sql.prepare('DELETE FROM t').run();
    open = proxy.proxy.connections;
    proxy.proxy.pause();
    await assert.rejects(insert.run('auto'), (error: { code?: string }) => error.code === 'storage_commit_unknown');
    while (proxy.proxy.connections >= open) await new Promise((resolve) => setTimeout(resolve, 5));
    proxy.proxy.resume();
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 0);
  } finally {
    await cleanUp();
  }
});

test('while no connection can be opened the health is down, and it comes back up by itself', async (t) => {
  if (!(await requirePostgres(t))) return;
  const { sql, proxy, cleanUp } = await setUp('magpie fault down');
  try {
    await sql.prepare('SELECT 1').get();
    proxy.proxy.pause();
    proxy.proxy.cutAll();
    await assert.rejects(sql.prepare('SELECT 2').get(), (error: { retryable?: boolean }) => error.retryable === true);
    await assert.rejects(sql.prepare('SELECT 3').get(), (error: { code?: string }) => error.code === 'storage_timeout');
    assert.equal(sql.health.state, 'down');
    const states: string[] = [];
    const back = new Promise<void>((resolve) =>
      sql.onHealthChange((health) => {
        states.push(health.state);
        if (health.state === 'up') resolve();
      }),
    );
    proxy.proxy.resume();
    await back;
    assert.deepEqual(states, ['up'], 'the probe found the server again with no caller asking');
  } finally {
    await cleanUp();
  }
});
