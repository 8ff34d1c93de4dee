/**
 * What `PgPoolClient` costs on the wire, counted by the delay proxy: a statement outside a
 * transaction is one round trip, and statements issued together are pipelined; a transaction's BEGIN and savepoints travel with its statements;
 * its COMMIT is one more; a transaction that ran nothing sends nothing; a new connection costs
 * no statement for its settings.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PgPoolClient } from '../src/storage/postgres/pg-pool-client.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';
import { startDelayedPostgres } from './support/tcp-delay-proxy.js';

/** Inside a PostgreSQL suite run, schemas named after the run, which its runner drops. */
const RUN_PREFIX = `t${process.env.MAGPIE_TEST_RUN ?? ''}`;

test('round trips: one per statement, BEGIN and savepoints pipelined, none for an empty transaction', async (t) => {
  if (!(await requirePostgres(t))) return;
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 1);
  const schema = freshSchema(RUN_PREFIX);
  const sql = await PgPoolClient.connect({ url: proxy.url, schema, applicationName: 'magpie round trips', maxConnections: 2 });
  try {
    await sql.exec('CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)');
    const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
    await insert.run('warm');
    const cost = async (work: () => Promise<unknown>) => {
      const [trips, exchanges] = [proxy.roundTrips(), proxy.exchanges()];
      await work();
      return { trips: proxy.roundTrips() - trips, exchanges: proxy.exchanges() - exchanges };
    };
    assert.deepEqual(await cost(() => insert.run('one')), { trips: 1, exchanges: 1 });
    assert.deepEqual(await cost(() => sql.transaction(() => insert.run('two'))), { trips: 3, exchanges: 2 }, 'BEGIN rides with the INSERT, then COMMIT');
    assert.deepEqual(await cost(() => sql.transaction(async () => undefined)), { trips: 0, exchanges: 0 });
    assert.deepEqual(
      await cost(() =>
        sql.transaction(async () => {
          await insert.run('three');
          await sql.transaction(async () => {
            await insert.run('four');
          });
        }),
      ),
      { trips: 5, exchanges: 3 },
      'BEGIN with the first INSERT, SAVEPOINT with the second, RELEASE with the COMMIT',
    );
    assert.deepEqual(await cost(() => sql.transaction(() => sql.exec("INSERT INTO t (v) VALUES ('five')"))), { trips: 2, exchanges: 2 }, 'a script carries its BEGIN');
    const burst = await cost(() => Promise.all(Array.from({ length: 20 }, (_, index) => insert.run(`burst-${index}`))));
    assert.equal(burst.trips, 20);
    assert.ok(burst.exchanges <= 5, `20 writes issued together share the waits (pipelined): ${burst.exchanges} exchanges`);
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 26);
    assert.deepEqual(
      (await sql.prepare(`SELECT v FROM t WHERE v LIKE 'burst-%' ORDER BY id`).pluck().all()).map((v) => Number(String(v).slice(6))),
      Array.from({ length: 20 }, (_, index) => index),
      'in the order they were issued',
    );
  } finally {
    await sql.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await sql.close();
    await proxy.close();
  }
});

test('round trips: reads issued together leave in one write per lane; the catalog is asked once per table', async (t) => {
  if (!(await requirePostgres(t))) return;
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 1);
  const schema = freshSchema(RUN_PREFIX);
  const sql = await PgPoolClient.connect({ url: proxy.url, schema, applicationName: 'magpie round trips', maxConnections: 10 });
  try {
    await sql.exec('CREATE TABLE t (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)');
    await sql.exec("INSERT INTO t (v) SELECT 'row-' || n FROM generate_series(1, 100) AS n");
    const read = sql.prepare('SELECT v FROM t WHERE id = ?').pluck();
    await read.get(1);
    const cost = async <T>(work: () => Promise<T>) => {
      const [trips, exchanges] = [proxy.roundTrips(), proxy.exchanges()];
      const result = await work();
      return { result, trips: proxy.roundTrips() - trips, exchanges: proxy.exchanges() - exchanges };
    };
    // Ten reads together (a channel's load): one lane, one write, one wait.
    const load = await cost(() => Promise.all(Array.from({ length: 10 }, (_, index) => read.get(index + 1))));
    assert.deepEqual(load.result, Array.from({ length: 10 }, (_, index) => `row-${index + 1}`));
    assert.equal(load.trips, 10);
    assert.equal(load.exchanges, 1, 'ten reads issued together are one round trip');
    // A hundred reads together (a hundred channels loading) spread over the read lanes: a few waits, not a hundred.
    const burst = await cost(() => Promise.all(Array.from({ length: 100 }, (_, index) => read.get(index + 1))));
    assert.equal(new Set(burst.result).size, 100);
    assert.ok(burst.exchanges <= 8, `a hundred reads issued together: ${burst.exchanges} exchanges`);

    // The first INSERT into a table asks the catalog for its identity column; fifty at once ask once.
    await sql.exec('CREATE TABLE u (id BIGSERIAL PRIMARY KEY, v TEXT NOT NULL)');
    const insert = sql.prepare('INSERT INTO u (v) VALUES (?)');
    const first = await cost(() => sql.transaction(() => Promise.all(Array.from({ length: 50 }, (_, index) => insert.run(`u-${index}`)))));
    assert.deepEqual(
      first.result.map((row) => row.lastInsertRowid).sort((a, b) => Number(a) - Number(b)),
      Array.from({ length: 50 }, (_, index) => index + 1),
      'each INSERT reports its own new id',
    );
    assert.ok(first.trips <= 50 + 3, `50 inserts, BEGIN, one catalog question and the COMMIT: ${first.trips} statements`);
  } finally {
    await sql.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await sql.close();
    await proxy.close();
  }
});
