/**
 * The SQLite side of the asynchronous store seam: statements settle inside the call, a
 * transaction holds the connection across its awaits while outside statements queue behind it
 * in order, and a throw rolls back exactly what the transaction wrote.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { SerialClient } from '../src/storage/serial-client.js';

function client(): SerialClient {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  return new SerialClient(db);
}

test('a statement runs inside the call, so calls made without awaits keep their order', async () => {
  const sql = client();
  const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
  void insert.run('a');
  void insert.run('b');
  assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['a', 'b']);
  assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 2);
});

test('outside statements wait for an open transaction and run after it, in order', async () => {
  const sql = client();
  const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
  const order: string[] = [];
  const tx = sql.transaction(async () => {
    await insert.run('in-1');
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(sql.inTransaction, true);
    await insert.run('in-2');
    order.push('tx');
  });
  const outside = insert.run('out').then(() => order.push('out'));
  assert.equal(sql.inTransaction, false);
  await Promise.all([tx, outside]);
  assert.deepEqual(order, ['tx', 'out']);
  assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['in-1', 'in-2', 'out']);
});

test('a throw rolls back the transaction; a nested throw only its savepoint', async () => {
  const sql = client();
  const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
  await assert.rejects(
    sql.transaction(async () => {
      await insert.run('gone');
      throw new Error('boom');
    }),
    /boom/,
  );
  await sql.transaction(async () => {
    await insert.run('kept');
    await assert.rejects(
      sql.transaction(async () => {
        await insert.run('inner-gone');
        throw new Error('inner');
      }),
      /inner/,
    );
  });
  assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['kept']);
});

test('two transactions opened at once run one after the other', async () => {
  const sql = client();
  const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
  const log: string[] = [];
  const one = sql.transaction(async () => {
    log.push('one-start');
    await new Promise((resolve) => setTimeout(resolve, 10));
    await insert.run('one');
    log.push('one-end');
  });
  const two = sql.transaction(async () => {
    log.push('two-start');
    await insert.run('two');
    log.push('two-end');
  }, 'immediate');
  await Promise.all([one, two]);
  assert.deepEqual(log, ['one-start', 'one-end', 'two-start', 'two-end']);
});

test('a bad statement rejects its own promise and leaves the connection usable', async () => {
  const sql = client();
  await assert.rejects(sql.prepare('SELECT nope FROM t').all(), /no such column/);
  await assert.rejects(sql.exec('NOT SQL'), /syntax error/);
  assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 0);
});
