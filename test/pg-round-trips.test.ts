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
