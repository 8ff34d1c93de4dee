/**
 * A read keyed by channel, gathered into one statement on PostgreSQL: every caller gets exactly
 * the rows its key alone would give (order, missing keys, repeated keys, odd characters), a
 * burst asks one statement, a read inside a transaction sees that transaction, and a failed
 * statement rejects every caller it served. Both backends.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KeyedRead } from '../src/storage/keyed-read.js';
import type { SqlClient, SqlQuery } from '../src/storage/sql-client.js';
import { withBothBackends } from './support/both-backends.js';
import { requirePostgres } from './support/postgres-available.js';

const READ = 'SELECT n, label FROM keyed_things WHERE owner = @key ORDER BY n';
const KEYS = ['a', 'b', 'nobody', "o'brien", 'é 漢字 🙂', 'a'];

/** The client, counting the runs of every statement it prepares (the real statements run). */
function counting(db: SqlClient): { db: SqlClient; runs: Map<string, number> } {
  const runs = new Map<string, number>();
  const prepare = (sql: string): SqlQuery => {
    const query = db.prepare(sql);
    const all = query.all.bind(query);
    return Object.assign(Object.create(query) as SqlQuery, {
      all: (...params: unknown[]) => {
        runs.set(sql, (runs.get(sql) ?? 0) + 1);
        return all(...params);
      },
    });
  };
  return { db: new Proxy(db, { get: (target, key) => (key === 'prepare' ? prepare : Reflect.get(target, key, target)) }), runs };
}

async function exercise(db: SqlClient, label: string): Promise<void> {
  await db.exec('CREATE TABLE keyed_things (owner TEXT NOT NULL, n INTEGER NOT NULL, label TEXT NOT NULL)');
  // Inserted out of order, so an order the read did not ask for would show.
  for (const [owner, n] of [['a', 3], ['a', 1], ["o'brien", 7], ['a', 2], ['b', 5], ['é 漢字 🙂', 4]] as const) {
    await db.prepare('INSERT INTO keyed_things (owner, n, label) VALUES (?, ?, ?)').run(owner, n, `${owner}-${n}`);
  }
  const alone = new Map<string, unknown[]>();
  for (const key of KEYS) alone.set(key, await db.prepare(READ.replace('@key', '?')).all(key));
  assert.deepEqual(alone.get('a'), [{ n: 1, label: 'a-1' }, { n: 2, label: 'a-2' }, { n: 3, label: 'a-3' }]);

  const { db: counted, runs } = counting(db);
  const read = new KeyedRead(counted, READ, (left, right) => Number(left.n) - Number(right.n));
  const [rows, first, none] = await Promise.all([Promise.all(KEYS.map((key) => read.rows(key))), read.row('b'), read.row('nobody')]);
  KEYS.forEach((key, index) => assert.deepEqual(rows[index], alone.get(key), `${label}: ${key} as read alone`));
  assert.deepEqual(first, { n: 5, label: 'b-5' });
  assert.equal(none, undefined, `${label}: a key with no rows has no first row`);
  const statements = [...runs.values()].reduce((sum, count) => sum + count, 0);
  assert.equal(statements, db.dialect === 'postgres' ? 1 : KEYS.length + 2, `${label}: statements for the burst`);
  // Callers of one key get lists of their own.
  const [one, two] = await Promise.all([read.rows('a'), read.rows('a')]);
  one.pop();
  assert.equal(two.length, 3);

  const many = await read.many(['b', 'nobody', 'b']);
  assert.deepEqual([...many.keys()], ['b', 'nobody']);
  assert.deepEqual(many.get('nobody'), []);

  // Inside a transaction the read runs there and sees what the transaction wrote.
  await db.transaction(async () => {
    await db.prepare('INSERT INTO keyed_things (owner, n, label) VALUES (?, ?, ?)').run('nobody', 0, 'nobody-0');
    assert.deepEqual(await read.rows('nobody'), [{ n: 0, label: 'nobody-0' }], `${label}: in the transaction`);
    assert.deepEqual((await read.many(['nobody'])).get('nobody'), [{ n: 0, label: 'nobody-0' }]);
    throw new Error('roll back');
  }).catch((error: unknown) => assert.match(String(error), /roll back/));
  assert.deepEqual(await read.rows('nobody'), [], `${label}: rolled back`);

  // A statement that fails rejects every caller it was asked for, with the database's error.
  await db.exec('DROP TABLE keyed_things');
  const failed = await Promise.allSettled([read.rows('a'), read.rows('b')]);
  assert.deepEqual(failed.map((outcome) => outcome.status), ['rejected', 'rejected']);
  for (const outcome of failed) assert.match(String((outcome as PromiseRejectedResult).reason), /keyed_things/);
}

test('keyed read: the same rows per key as read alone, one statement per burst on PostgreSQL', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withBothBackends('keyed-read test', async (sqlite, postgres) => {
    await exercise(sqlite.db, 'sqlite');
    await exercise(postgres.db, 'postgres');
  });
});
