/**
 * The connections of their own beside the pool, on a real server: the session that holds the
 * advisory locks (taken back after a reconnect, reported lost when another session took one
 * meanwhile, reclaimed from its own lost connection) and LISTEN/NOTIFY across two clients,
 * subscribed again after its connection is terminated.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import pg from 'pg';
import { PgNotifications } from '../src/storage/postgres/pg-notifications.js';
import { PgPoolClient } from '../src/storage/postgres/pg-pool-client.js';
import { PgSession } from '../src/storage/postgres/pg-session.js';
import { SessionChannelLocks, takeWriterLock } from '../src/storage/postgres/pg-session-locks.js';
import { STORAGE_WRITERS_TABLE } from '../src/storage/postgres/pg-session-locks.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';

/** Inside a PostgreSQL suite run, schemas named after the run, which its runner drops. */
const RUN_PREFIX = `t${process.env.MAGPIE_TEST_RUN ?? ''}`;
import { startDelayedPostgres } from './support/tcp-delay-proxy.js';

const FAST = { statementTimeoutMs: 800, queryTimeoutMs: 1_000, connectTimeoutMs: 1_000, reconnectDelaysMs: [50, 100, 200] };

async function admin(schema: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, options: `-c search_path=${schema}` });
  await client.connect();
  await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  return client;
}

/** Whether another session could take `key` in `schema` now (it lets go at once if so). */
async function freeElsewhere(client: pg.Client, key: string): Promise<boolean> {
  const result = await client.query(`SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':' || $1::text, 0)) AS locked`, [key]);
  const locked = (result.rows[0] as { locked: boolean }).locked;
  if (locked) await client.query(`SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':' || $1::text, 0))`, [key]);
  return locked;
}

function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = performance.now() + 8_000;
    const check = async () => {
      if (await condition()) return resolve();
      if (performance.now() > deadline) return reject(new Error(`timed out waiting for ${what}`));
      setTimeout(check, 20);
    };
    void check();
  });
}

test('the session takes its locks back after its connection is terminated', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema(RUN_PREFIX);
  const other = await admin(schema);
  const session = await PgSession.open({ settings: { url: TEST_DATABASE_URL, schema, applicationName: 'magpie session retake' }, ...FAST });
  try {
    await assert.rejects(
      PgSession.open({ settings: { url: 'postgres://postgres@127.0.0.1:1/test', schema }, ...FAST }),
      (error: { code?: string; retryable?: boolean }) => error.code === 'storage_connection' && error.retryable === true,
    );
    const bare = await PgSession.open({ settings: { url: TEST_DATABASE_URL, schema: freshSchema(RUN_PREFIX) }, ...FAST });
    await assert.rejects(bare.tryLock('writer:x'), /does not exist/);
    await bare.close();
    assert.equal(await session.tryLock('writer:shard-0'), true);
    assert.equal(await session.tryLock('compaction:123'), true);
    assert.equal(await session.tryLock('writer:shard-0'), true, 'taking a held lock again is a no-op');
    assert.equal(await freeElsewhere(other, 'writer:shard-0'), false);
    const states: string[] = [];
    session.onStateChange((state) => states.push(state));
    const lost: string[] = [];
    session.onLost((key) => lost.push(key));
    await other.query(`SELECT pg_terminate_backend(pid, 2000) FROM pg_stat_activity WHERE application_name = 'magpie session retake'`);
    await until(() => states.includes('up'), 'the session to reconnect');
    assert.deepEqual(states, ['reconnecting', 'up']);
    assert.deepEqual(lost, []);
    assert.equal(await freeElsewhere(other, 'writer:shard-0'), false, 'held again');
    assert.equal(await freeElsewhere(other, 'compaction:123'), false, 'held again');
    await session.unlock('compaction:123');
    assert.equal(await freeElsewhere(other, 'compaction:123'), true);
    assert.deepEqual(session.keys, ['writer:shard-0']);
  } finally {
    await session.close();
    await other.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await other.end();
  }
});

test('a lock another session took meanwhile is reported lost, and no longer counted as held', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema(RUN_PREFIX);
  const other = await admin(schema);
  const session = await PgSession.open({
    settings: { url: TEST_DATABASE_URL, schema, applicationName: 'magpie session lost' },
    ...FAST,
    reconnectDelaysMs: [400],
  });
  try {
    assert.equal(await session.tryLock('writer:shard-1'), true);
    assert.equal(await session.tryLock('writer:shard-2'), true);
    const lost: string[] = [];
    const reported = new Promise<void>((resolve) => session.onLost((key) => (lost.push(key), resolve())));
    await other.query(`SELECT pg_terminate_backend(pid, 2000) FROM pg_stat_activity WHERE application_name = 'magpie session lost'`);
    // Another process takes shard 1 before the session is back.
    await until(async () => ((await other.query(`SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':writer:shard-1', 0)) AS l`)).rows[0] as { l: boolean }).l, 'the lock to be free');
    await reported;
    assert.deepEqual(lost, ['writer:shard-1']);
    await until(() => session.state === 'up', 'the session to be up');
    assert.deepEqual(session.keys, ['writer:shard-2']);
    assert.equal(await freeElsewhere(other, 'writer:shard-2'), false);
  } finally {
    await session.close();
    await other.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await other.end();
  }
});

test('a connection that went silent is replaced, and its locks reclaimed from its own old server process', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema(RUN_PREFIX);
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 0);
  const other = await admin(schema);
  const session = await PgSession.open({ settings: { url: proxy.url, schema, applicationName: 'magpie session silent' }, ...FAST, heartbeatMs: 100 });
  try {
    assert.equal(await session.tryLock('writer:shard-3'), true);
    const lost: string[] = [];
    session.onLost((key) => lost.push(key));
    const states: string[] = [];
    session.onStateChange((state) => states.push(state));
    // The server still sees the old connection (and its lock); the session sees no answers.
    proxy.proxy.stallOpen();
    await until(() => states.includes('up'), 'the session to reconnect');
    assert.deepEqual(lost, []);
    assert.deepEqual(session.keys, ['writer:shard-3']);
    assert.equal(await freeElsewhere(other, 'writer:shard-3'), false, 'the new connection holds it');
  } finally {
    await session.close();
    await other.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await other.end();
    await proxy.close();
  }
});

test('NOTIFY reaches another client on commit only, and LISTEN is restored after its connection is terminated', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema(RUN_PREFIX);
  const pool = await PgPoolClient.connect({ url: TEST_DATABASE_URL, schema, applicationName: 'magpie notify sender' });
  const listener = await PgNotifications.open({ settings: { url: TEST_DATABASE_URL, schema, applicationName: 'magpie notify listener' }, ...FAST });
  const sender = await PgNotifications.open({ settings: { url: TEST_DATABASE_URL, schema, applicationName: 'magpie notify sender 2' }, ...FAST, notifier: pool });
  const other = await admin(schema);
  try {
    const heard: string[] = [];
    await listener.listen('deletes', (payload) => heard.push(payload));
    await assert.rejects(
      pool.transaction(async () => {
        await sender.notify('deletes', 'rolled-back');
        throw new Error('undo');
      }),
      /undo/,
    );
    await pool.transaction(async () => {
      await sender.notify('deletes', 'msg:1');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(heard, [], 'not before the commit');
    });
    await until(() => heard.length === 1, 'the notification');
    assert.deepEqual(heard, ['msg:1']);
    await assert.rejects(sender.notify('deletes', 'x'.repeat(2_000)), /at most 1000/);
    await assert.rejects(listener.listen('bad topic!', () => undefined), /topic "bad topic!"/);

    let resubscribed = 0;
    listener.onResubscribed(() => (resubscribed += 1));
    await other.query(`SELECT pg_terminate_backend(pid, 2000) FROM pg_stat_activity WHERE application_name = 'magpie notify listener'`);
    await until(() => resubscribed === 1 && listener.state === 'up', 'the listener to resubscribe');
    await sender.notify('deletes', 'msg:2');
    await sender.notify('deletes', 'msg:3', undefined);
    await until(() => heard.length === 3, 'notifications after the reconnect');
    assert.deepEqual(heard, ['msg:1', 'msg:2', 'msg:3']);
  } finally {
    await listener.close();
    await sender.close();
    await pool.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await pool.close();
    await other.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await other.end();
  }
});

/** A fresh schema with its writers table, a pool on it and two lock sessions; all gone after `use`. */
async function withTwoWriters(
  use: (fixture: { sql: PgPoolClient; other: pg.Client; first: PgSession; second: PgSession }) => Promise<void>,
): Promise<void> {
  const schema = freshSchema(RUN_PREFIX);
  const other = await admin(schema);
  await other.query(STORAGE_WRITERS_TABLE);
  const settings = { url: TEST_DATABASE_URL, schema };
  const sql = await PgPoolClient.connect(settings);
  const first = await PgSession.open({ settings, ...FAST });
  const second = await PgSession.open({ settings, ...FAST });
  try {
    await use({ sql, other, first, second });
  } finally {
    await first.close();
    await second.close();
    await sql.close();
    await other.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await other.end();
  }
}

test('a writer lock held for a process of this host that is gone is waited for, not refused', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withTwoWriters(async ({ sql, first: crashed, second: restarted }) => {
    await takeWriterLock(crashed, sql, 'shard-0', 'magpie start');
    // The row names a process of this host that has exited, as after kill -9; its session is
    // still open, as when PostgreSQL has not yet noticed the closed socket.
    const child = spawn(process.execPath, ['-e', '']);
    const gonePid = child.pid!;
    await new Promise((resolve) => child.on('exit', resolve));
    await sql.prepare('UPDATE storage_writers SET pid = ? WHERE lock_key = ?').run(gonePid, 'shard-0');
    let ended = false;
    setTimeout(() => {
      ended = true;
      void crashed.close();
    }, 300);
    const held = await takeWriterLock(restarted, sql, 'shard-0', 'magpie start');
    assert.equal(ended, true, 'taken once the old session ended, not before');
    const row = (await sql.prepare('SELECT pid FROM storage_writers WHERE lock_key = ?').get('shard-0')) as { pid: number };
    assert.equal(Number(row.pid), process.pid, 'the new writer is named');
    await held.release();
  });
});

test('the writer lock on the session refuses a second writer by name, and excludes the old synchronous lock id too', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withTwoWriters(async ({ sql, other, first, second }) => {
    const held = await takeWriterLock(first, sql, 'shard-0', 'magpie start');
    await assert.rejects(takeWriterLock(second, sql, 'shard-0', 'magpie start'), (error: { code?: string; message: string }) =>
      error.code === 'data_dir_locked' && error.message.includes(`magpie start (pid ${process.pid}`),
    );
    // Said in the operator's words: which part of the schema, and advice that fits the command.
    const whole = await takeWriterLock(first, sql, 'all', 'magpie chat');
    await assert.rejects(takeWriterLock(second, sql, 'all', 'magpie replay'), (error: { code?: string; message: string; hint?: string }) => {
      assert.match(error.message, /magpie chat \(pid \d+ on .*\) already writes this schema in PostgreSQL \(schema "/);
      assert.doesNotMatch(`${error.message} ${error.hint}`, /writes all|--shard-ids/);
      return true;
    });
    await whole.release();
    const sharded = await takeWriterLock(first, sql, 'shard-1-of-4', 'magpie start');
    await assert.rejects(takeWriterLock(second, sql, 'shard-1-of-4', 'magpie start'), (error: { message: string; hint?: string }) => {
      assert.match(error.message, /already writes shard 1 of 4 in PostgreSQL/);
      assert.match(String(error.hint), /--shard-ids/);
      return true;
    });
    await sharded.release();
    // The id pg-session-locks.ts takes for the same key.
    const old = await other.query(`SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':writer:' || 'shard-0', 0)) AS locked`);
    assert.equal((old.rows[0] as { locked: boolean }).locked, false);
    await held.release();
    const again = await takeWriterLock(second, sql, 'shard-0', 'magpie start');
    const locks = new SessionChannelLocks(first);
    assert.equal(await locks.tryAcquire('42'), true);
    assert.equal(await new SessionChannelLocks(second).tryAcquire('42'), false);
    await locks.release('42');
    assert.equal(await new SessionChannelLocks(second).tryAcquire('42'), true);
    await again.release();
  });
});
