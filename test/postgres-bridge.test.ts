/** The connection thread behind PgDatabase: every statement gets its own reply, in order. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PgDatabase } from '../src/storage/postgres/pg-database.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';

test('thousands of statements in a row each get their own answer (no late wake-up is taken for a reply)', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema();
  const db = new PgDatabase({ url: TEST_DATABASE_URL, schema, applicationName: 'bridge test', statementTimeoutMs: 30_000 });
  try {
    const echo = db.prepare('SELECT ?::int AS n');
    const plucked = db.prepare('SELECT ?::text AS word').pluck();
    for (let index = 0; index < 5_000; index += 1) {
      assert.deepEqual(echo.get(index), { n: index });
      assert.equal(plucked.get(`w${index}`), `w${index}`);
    }
  } finally {
    db.exec(`DROP SCHEMA "${schema}" CASCADE`);
    db.close();
  }
});

test('a statement that fails inside a transaction rolls it back and the connection goes on', async (t) => {
  if (!(await requirePostgres(t))) return;
  const schema = freshSchema();
  const db = new PgDatabase({ url: TEST_DATABASE_URL, schema, applicationName: 'bridge test', statementTimeoutMs: 30_000 });
  try {
    db.exec('CREATE TABLE pairs (k TEXT PRIMARY KEY, v BIGINT NOT NULL)');
    const put = db.prepare('INSERT INTO pairs (k, v) VALUES (?, ?)');
    const count = db.prepare('SELECT count(*) AS n FROM pairs').pluck();
    const outer = db.transaction((keys: string[]) => {
      put.run('first', 1);
      // A nested transaction is a savepoint: its failure undoes only itself when caught.
      const inner = db.transaction(() => {
        put.run('second', 2);
        put.run('second', 3);
      });
      assert.throws(() => inner(), (error: { code?: string }) => error.code === '23505');
      for (const key of keys) put.run(key, 4);
    });
    outer(['third']);
    assert.equal(count.get(), 2, 'the outer transaction kept its rows, the savepoint dropped its own');
    assert.throws(() => outer(['first']), (error: { code?: string }) => error.code === '23505');
    assert.equal(count.get(), 2, 'a failed transaction left nothing');
    assert.equal(db.inTransaction, false);
    const empty = db.transaction(() => 'nothing ran');
    assert.equal(empty(), 'nothing ran', 'a transaction that runs no statement costs no round trip and fails nothing');
    assert.deepEqual(put.run('fourth', 5), { changes: 1, lastInsertRowid: 0 });
  } finally {
    db.exec(`DROP SCHEMA "${schema}" CASCADE`);
    db.close();
  }
});
