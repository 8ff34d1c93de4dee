/**
 * The SQLite side of the asynchronous store seam: statements settle inside the call, a
 * transaction holds the connection across its awaits while outside statements queue behind it
 * in order, and a throw rolls back exactly what the transaction wrote. A script the writer thread
 * runs holds the file the same way, except that outside reads go on meanwhile.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SerialClient } from '../src/storage/serial-client.js';
import { wantsWriterThread, WriterThread } from '../src/storage/writer-thread.js';

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

/** A file-backed database in WAL mode (a writer thread needs a file of its own to open). */
function fileClient(): { sql: SerialClient; file: string; cleanup: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), 'magpie-serial-'));
  const file = join(dir, 'db.sqlite');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL UNIQUE, b BLOB)');
  const sql = new SerialClient(db);
  return {
    sql,
    file,
    cleanup: async () => {
      await sql.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('a script runs whole on the writer thread, with rows that point at the rows it just inserted', async () => {
  const { sql, file, cleanup } = fileClient();
  try {
    await sql.exec('CREATE TABLE owed (item INTEGER PRIMARY KEY, note TEXT)');
    sql.useWriterThread(new WriterThread(file));
    await sql.prepare('INSERT INTO t (v) VALUES (?)').run('old');
    const committed = await sql.scriptOffThread(() => [
      { sql: 'INSERT OR IGNORE INTO t (v, b) VALUES (?, ?)', paramLists: [['a', Buffer.from([1, 2, 3])], ['old', null], ['c', null]] },
      { sql: 'INSERT INTO owed (item, note) VALUES (?, ?)', paramLists: [['for a'], ['for old'], ['for c']], afterRowidsOfPrevious: true },
    ]);
    assert.equal(committed, true);
    // The main connection sees the commit, BLOBs as written; "old" was there already, so no row points at it.
    assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['old', 'a', 'c']);
    assert.deepEqual([...((await sql.prepare('SELECT b FROM t WHERE v = ?').pluck().get('a')) as Buffer)], [1, 2, 3]);
    assert.deepEqual(await sql.prepare('SELECT item || note FROM owed ORDER BY item').pluck().all(), ['2for a', '3for c']);
  } finally {
    await cleanup();
  }
});

test('while the thread holds the file, outside reads go on (seeing only what was committed) and outside writes wait', async () => {
  const { sql, file, cleanup } = fileClient();
  // Another process's writer, holding SQLite's write lock: the thread's script waits for it.
  const other = new Database(file);
  try {
    sql.useWriterThread(new WriterThread(file));
    const insert = sql.prepare('INSERT INTO t (v) VALUES (?)');
    await insert.run('before');
    other.exec('BEGIN IMMEDIATE');
    const order: string[] = [];
    const script = sql.scriptOffThread(() => [{ sql: 'INSERT INTO t (v) VALUES (?)', paramLists: [['inside']] }]).then(() => order.push('script'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['before']);
    const outside = insert.run('outside').then(() => order.push('outside'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(order, []);
    other.exec('COMMIT');
    await Promise.all([script, outside]);
    // Row ids in commit order: the outside write ran after the script committed.
    assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['before', 'inside', 'outside']);
  } finally {
    other.close();
    await cleanup();
  }
});

test('a script rolls back whole when a run that must change a row does not, or SQLite refuses one; the thread carries on', async () => {
  const { sql, file, cleanup } = fileClient();
  try {
    sql.useWriterThread(new WriterThread(file));
    await sql.prepare('INSERT INTO t (v) VALUES (?)').run('kept');
    await assert.rejects(
      sql.scriptOffThread(() => [{ sql: 'INSERT OR IGNORE INTO t (v) VALUES (?)', paramLists: [['gone'], ['kept']], mustChange: true }]),
      (error: Error & { code?: string }) => error.code === 'script_conflict' && /run 2/.test(error.message),
    );
    await assert.rejects(
      sql.scriptOffThread(() => [{ sql: 'INSERT INTO t (v) VALUES (?)', paramLists: [['gone too'], ['kept']] }]),
      (error: Error & { code?: string }) => error.code === 'SQLITE_CONSTRAINT_UNIQUE' && /UNIQUE/.test(error.message),
    );
    assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['kept']);
    await sql.scriptOffThread(() => [{ sql: 'INSERT INTO t (v) VALUES (?)', paramLists: [['later']] }]);
    assert.deepEqual(await sql.prepare('SELECT v FROM t ORDER BY id').pluck().all(), ['kept', 'later']);
  } finally {
    await cleanup();
  }
});

test('a writer thread that cannot open its file says why, and scripts are refused so the caller writes on its own connection', async () => {
  const { sql, file, cleanup } = fileClient();
  try {
    const failures: string[] = [];
    const thread = new WriterThread(`${file}.missing`, { onFailure: (error) => failures.push(error) });
    sql.useWriterThread(thread);
    while (thread.usable) await new Promise((resolve) => setTimeout(resolve, 5));
    let built = false;
    const build = () => ((built = true), [{ sql: 'INSERT INTO t (v) VALUES (?)', paramLists: [['one']] }]);
    assert.equal(await sql.scriptOffThread(build), false);
    // Without a thread the rows are not even made: the caller makes its own.
    assert.equal(built, false);
    assert.equal(failures.length, 1);
    assert.match(failures[0]!, /writer thread/);
    assert.equal(await sql.prepare('SELECT count(*) FROM t').pluck().get(), 0);
  } finally {
    await cleanup();
  }
});

test('a writer thread that dies with a script in flight makes it storage_commit_unknown, and later scripts fall back', async () => {
  const { sql, file, cleanup } = fileClient();
  try {
    const failures: string[] = [];
    const thread = new WriterThread(file, { onFailure: (error) => failures.push(error) });
    sql.useWriterThread(thread);
    const rows = Array.from({ length: 50_000 }, (_, index) => [`row-${index}`]);
    const inFlight = sql.scriptOffThread(() => [{ sql: 'INSERT INTO t (v) VALUES (?)', paramLists: rows }]);
    // As a crash of the thread would: it ends without answering.
    void (thread as unknown as { worker: import('node:worker_threads').Worker }).worker.terminate();
    await assert.rejects(inFlight, (error: Error & { code?: string }) => error.code === 'storage_commit_unknown');
    assert.equal(thread.usable, false);
    assert.equal(failures.length, 1);
    // All or nothing, whichever it was; and the file is free for this connection's writes.
    const stored = (await sql.prepare('SELECT count(*) FROM t').pluck().get()) as number;
    assert.ok(stored === 0 || stored === rows.length, `${stored} rows`);
    assert.equal(await sql.scriptOffThread(() => [{ sql: 'INSERT INTO t (v) VALUES (?)', paramLists: [['after']] }]), false);
    await sql.prepare('INSERT INTO t (v) VALUES (?)').run('after');
  } finally {
    await cleanup();
  }
});

test('[storage] writer_thread: on and off as said; auto only with cores to spare', () => {
  assert.equal(wantsWriterThread('on', 1), true);
  assert.equal(wantsWriterThread('off', 64), false);
  assert.equal(wantsWriterThread('auto', 2), false);
  assert.equal(wantsWriterThread('auto', 4), true);
});
