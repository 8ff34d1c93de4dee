/**
 * `magpie migrate --to postgres` as a real process against the test PostgreSQL server: a
 * replayed data dir arrives row for row, a second migrate is refused, shards merge with their
 * ids moved, a kill -9 mid-copy leaves nothing behind, and bad input is refused clearly.
 * Without a reachable server the tests skip with the reason (under CI=true they fail).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { DATABASE_FILE } from '../src/storage/database.js';
import { searchText } from '../src/memory/search-text.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { WriterLock } from '../src/storage/writer-lock.js';
import { generateTranscript, tempDir } from './compaction-support.js';
import { MAGPIE_MAIN, runMagpie } from './support/magpie-process.js';
import { freshSchema } from './support/postgres-available.js';
import { dropSchema, postgresCount, postgresOrSkip, postgresRows, sqliteRows, sqliteTables } from './support/postgres-compare.js';
import { TEST_DATABASE_URL } from './support/storage.js';

/** A child's whole environment: SQLite for replay, the test server as migrate's target. */
function env(schema: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    MAGPIE_STORAGE_BACKEND: 'sqlite',
    MAGPIE_DATABASE_URL: TEST_DATABASE_URL,
    MAGPIE_STORAGE_SCHEMA: schema,
    MAGPIE_DATA_DIR: '',
    ...extra,
  };
}

/** A data dir written by `magpie replay` with compaction on (summaries, compaction log, memories). */
async function replayedDir(root: string, name: string, transcript: string, schema: string): Promise<string> {
  mkdirSync(root, { recursive: true });
  const file = join(root, `${name}.jsonl`);
  writeFileSync(file, transcript);
  const dir = join(root, name);
  const run = await runMagpie(['replay', file, '--data-dir', dir, '--context-window', '2000'], { cwd: root, env: env(schema) });
  assert.equal(run.code, 0, run.stderr);
  return dir;
}

/** Rows in every table the replay leaves empty, with the values that are easy to get wrong. */
function fillOtherTables(dir: string): void {
  const db = new Database(join(dir, DATABASE_FILE));
  db.exec(`
    INSERT INTO channel_personas VALUES ('chan-0', 'You are terse. Ünïcödé 🐦 and "quotes", back\\slash, tab	here', 'ann', 1735689600000);
    INSERT INTO channel_views VALUES ('chan-0', 'guild-1', NULL, 'view-a', 1735689600001);
    INSERT INTO token_budget VALUES ('chan-0', 20089, 123456);
    INSERT INTO deleted_messages VALUES ('chan-1', 'msg-gone', 1735689600002);
    INSERT INTO worker_tasks VALUES ('task-1', 'chan-0', 'count the votes', 'done', 'ann', 2, 321, 1735689600003, NULL);
    INSERT INTO history_calibration VALUES ('chan-0', 1.0734, 17, 1735689600004, 0.9871, 1.2345);
    INSERT INTO message_replies VALUES ('chan-0', 3, 'msg-6', 'msg-0', 12);
    INSERT INTO message_attachments VALUES ('chan-0', 3, 0, 'msg-6', 'image', 'cat.png', 4, 'image/png', 2, 2, 85, NULL, 0, NULL, x'89504e47');
    INSERT INTO memory_index_tombstones VALUES ('channel:chan-0', 99999);
    INSERT INTO erasure_requests VALUES (1, 'user', 'u-9', 'done', '{"messages":0}', 1735689600007, 1735689600008);
    INSERT INTO erasure_claims VALUES (1, 'proc-1', 1735689600009);
  `);
  db.prepare(
    `INSERT INTO memory_items (kind, content, memory_type, importance, scope, index_key, channel_id, source_ids, content_hash, fts_text, fts_tags, created_at, updated_at)
     VALUES ('memory', ?, 'preference', 0.7, 'channel', 'channel:chan-0', 'chan-0', '["msg-3"]', 'hash-1', ?, 'tags', 1735689600005, 1735689600006)`,
  ).run('Ann prefers the 7:30 train\nand tea, not coffee', searchText('Ann prefers the 7:30 train\nand tea, not coffee'));
  const item = db.prepare(`SELECT max(rowid) FROM memory_items`).pluck().get() as number;
  db.prepare(`INSERT INTO memory_vector_backlog VALUES (?, 'channel:chan-0')`).run(item);
  // Vectors deleted above the highest one left: their seqs must not be handed out again.
  db.exec(`UPDATE sqlite_sequence SET seq = seq + 7 WHERE name = 'memory_vectors'`);
  db.close();
}

function migrate(args: string[], root: string, schema: string, extra: NodeJS.ProcessEnv = {}) {
  return runMagpie(['migrate', '--to', 'postgres', ...args], { cwd: root, env: env(schema, extra) });
}

test('a replayed data dir migrates with every row of every table, ids and sequences intact', { timeout: 300_000 }, async (t) => {
  const client = await postgresOrSkip(t);
  if (!client) return;
  const root = tempDir();
  const schema = freshSchema('t_migrate_full');
  t.after(async () => {
    await dropSchema(client, schema);
    await client.end();
    root.remove();
  });
  const transcript = generateTranscript(300, { channels: 3 }) + `${JSON.stringify({ id: 'odd', channel: 'chan-0', author: 'ann', content: 'tab\there, back\\slash, “quotes”, 🐦, עברית' })}\n`;
  const dir = await replayedDir(root.path, 'data', transcript, schema);
  fillOtherTables(dir);

  const run = await migrate(['--data-dir', dir, '--json'], root.path, schema);
  assert.equal(run.code, 0, run.stderr);
  const summary = JSON.parse(run.stdout) as { committed: boolean; rows: number; verification: { ok: boolean; checksums: Array<{ label: string; rows: number }> } };
  assert.equal(summary.committed, true);
  assert.equal(summary.verification.ok, true);
  assert.deepEqual(summary.verification.checksums.map((checksum) => [checksum.label, checksum.rows]), [['messages', 301], ['memory items', 302], ['vectors', 301]]);

  let rows = 0;
  for (const table of sqliteTables(dir)) {
    const source = sqliteRows(dir, table);
    assert.ok(source.rows.length > 0, `${table} has rows to compare`);
    assert.deepEqual(await postgresRows(client, schema, table, source.columns), source.rows, table);
    rows += source.rows.length;
  }
  assert.equal(summary.rows, rows);

  const applied = await client.query(`SELECT name FROM "${schema}".schema_migrations ORDER BY name`);
  assert.deepEqual(applied.rows.map((row: { name: string }) => row.name), ALL_MIGRATIONS.map((migration) => migration.name).sort());
  // The next ids come after every id SQLite handed out, deleted rows included.
  const source = new Database(join(dir, DATABASE_FILE), { readonly: true });
  const sequence = source.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'memory_vectors'`).pluck().get() as number;
  const topItem = source.prepare('SELECT max(rowid) FROM memory_items').pluck().get() as number;
  source.close();
  const next = await client.query(
    `SELECT nextval(pg_get_serial_sequence('"${schema}".memory_vectors', 'seq'))::int AS vector, nextval(pg_get_serial_sequence('"${schema}".memory_items', 'rowid'))::int AS item`,
  );
  assert.deepEqual(next.rows[0], { vector: sequence + 1, item: topItem + 1 });
  // Full text works on the copy: the tsvector column (of the copied search tokens) and its GIN index were built.
  const found = await client.query(`SELECT count(*)::int AS hits FROM "${schema}".memory_items WHERE fts @@ plainto_tsquery('simple', $1)`, [
    searchText('tea coffee'),
  ]);
  assert.equal((found.rows[0] as { hits: number }).hits, 1);
});

test('a second migrate into a schema holding data is refused, --force replaces it, and the writer lock is respected', { timeout: 300_000 }, async (t) => {
  const client = await postgresOrSkip(t);
  if (!client) return;
  const root = tempDir();
  const schema = freshSchema('t_migrate_again');
  t.after(async () => {
    await dropSchema(client, schema);
    await client.end();
    root.remove();
  });
  const dir = await replayedDir(root.path, 'data', generateTranscript(60, { channels: 2 }), schema);
  const first = await migrate(['--data-dir', dir], root.path, schema);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /^migrated .* 60 messages/ms);

  const again = await migrate(['--data-dir', dir], root.path, schema);
  assert.equal(again.code, 1);
  assert.match(again.stderr, new RegExp(`schema ${schema} .* already holds Magpie data \\(.*history_entries`));
  assert.match(again.stderr, /--force/);
  assert.equal(await postgresCount(client, schema, 'history_entries'), 60);

  // A table of someone else's in the same schema is neither counted as Magpie data nor touched.
  await client.query(`CREATE TABLE "${schema}".operator_notes (note TEXT); INSERT INTO "${schema}".operator_notes VALUES ('keep me')`);
  // More history in the data dir, then --force: the target holds exactly the data dir's rows.
  const more = join(root.path, 'more.jsonl');
  writeFileSync(more, generateTranscript(90, { channels: 2 }));
  assert.equal((await runMagpie(['replay', more, '--data-dir', dir, '--context-window', '2000'], { cwd: root.path, env: env(schema) })).code, 0);
  const forced = await migrate(['--data-dir', dir, '--force'], root.path, schema);
  assert.equal(forced.code, 0, forced.stderr);
  assert.match(forced.stdout, /replaced the data the schema held/);
  assert.equal(await postgresCount(client, schema, 'history_entries'), 90);
  assert.equal(await postgresCount(client, schema, 'operator_notes'), 1);

  // A bot (here: this process) holding the data dir's writer lock keeps migrate out.
  const lock = WriterLock.acquire(dir, { command: 'magpie start' });
  try {
    const locked = await migrate(['--data-dir', dir, '--force'], root.path, schema);
    assert.equal(locked.code, 1);
    assert.match(locked.stderr, /in use by magpie start \(pid \d+/);
  } finally {
    lock.release();
  }
});

test('shard dirs merge into one schema: the first keeps its ids, the next are moved past them; a shared channel is refused', { timeout: 300_000 }, async (t) => {
  const client = await postgresOrSkip(t);
  if (!client) return;
  const root = tempDir();
  const schema = freshSchema('t_migrate_shards');
  t.after(async () => {
    await dropSchema(client, schema);
    await client.end();
    root.remove();
  });
  const sharded = join(root.path, 'sharded');
  const renamed = (text: string, prefix: string) => text.replaceAll('"chan-', `"${prefix}-`);
  await replayedDir(sharded, 'shard-0', renamed(generateTranscript(80, { channels: 2 }), 'zero'), schema);
  await replayedDir(sharded, 'shard-1', renamed(generateTranscript(50, { channels: 2, seed: 7 }), 'one'), schema);
  const run = await migrate(['--data-dir', sharded], root.path, schema);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /shard-0: ids kept/);
  assert.match(run.stdout, /shard-1: ids moved up by .*memory_items \+80\b.*rebuilt on first use/);
  const items = await client.query(`SELECT channel_id, message_id, rowid::int AS rowid, content FROM "${schema}".memory_items ORDER BY rowid`);
  assert.equal(items.rows.length, 130);
  assert.deepEqual(
    items.rows.map((row: { rowid: number }) => row.rowid),
    Array.from({ length: 130 }, (_, index) => index + 1),
  );
  for (const [shard, offset] of [['shard-0', 0], ['shard-1', 80]] as const) {
    const { rows } = sqliteRows(join(sharded, shard), 'memory_items');
    const ids = rows.map((row) => Number((JSON.parse(row) as string[])[0]) + offset).sort((left, right) => left - right);
    const copied = items.rows.filter((row: { channel_id: string }) => row.channel_id.startsWith(shard === 'shard-0' ? 'zero' : 'one'));
    assert.deepEqual(copied.map((row: { rowid: number }) => row.rowid), ids, shard);
  }
  // Index state rows describe shard-0's files only; shard-1's indexes are rebuilt.
  const states = await client.query(`SELECT index_key FROM "${schema}".memory_index_state ORDER BY index_key`);
  assert.ok(states.rows.every((row: { index_key: string }) => row.index_key.includes('zero')), JSON.stringify(states.rows));

  const clash = join(root.path, 'clash');
  await replayedDir(clash, 'shard-0', generateTranscript(10, { channels: 1 }), schema);
  await replayedDir(clash, 'shard-1', generateTranscript(10, { channels: 1, seed: 9 }), schema);
  const refused = await migrate(['--data-dir', clash, '--schema', freshSchema('t_migrate_clash')], root.path, schema);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /channel chan-0 has data in both shard-0 .* and shard-1/);
});

test('kill -9 or Ctrl-C in the middle of the copy leaves the target without any of the data', { timeout: 300_000 }, async (t) => {
  const client = await postgresOrSkip(t);
  if (!client) return;
  const root = tempDir();
  const schema = freshSchema('t_migrate_killed');
  t.after(async () => {
    await dropSchema(client, schema);
    await client.end();
    root.remove();
  });
  const dir = await replayedDir(root.path, 'data', generateTranscript(40, { channels: 2 }), schema);
  const db = new Database(join(dir, DATABASE_FILE));
  db.exec(`
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400000)
    INSERT INTO compaction_log (channel_id, at, kind, tier, position, usage, data)
    SELECT 'bulk-' || (i % 50), i, 'usage', NULL, i, 0.5, '{"n":' || i || '}' FROM n;
  `);
  db.close();

  // Progress is forced on so the test sees rows being copied, then kills at once.
  const child = spawn(process.execPath, [MAGPIE_MAIN, 'migrate', '--to', 'postgres', '--data-dir', dir], { cwd: root.path, env: env(schema, { MAGPIE_PROGRESS: '1' }) });
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const copied = await new Promise<number>((resolve) => {
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const match = /migrate: ([\d,]+) \/ ([\d,]+) rows/.exec(stderr);
      if (match && Number(match[1]!.replaceAll(',', '')) > 0) resolve(Number(match[1]!.replaceAll(',', '')));
    });
    child.on('close', () => resolve(-1));
  });
  child.kill('SIGKILL');
  await exited;
  assert.ok(copied > 0, `the copy was under way when killed (stderr showed progress), stdout: ${stdout}`);
  assert.equal(stdout, '', 'killed before any summary');

  // The server rolled the transaction back: not one row of the data dir is there.
  for (const table of sqliteTables(dir)) assert.equal(await postgresCount(client, schema, table), 0, table);

  // Ctrl-C midway: the same, and the command says so (130, as a shell expects).
  const stopped = spawn(process.execPath, [MAGPIE_MAIN, 'migrate', '--to', 'postgres', '--data-dir', dir], { cwd: root.path, env: env(schema, { MAGPIE_PROGRESS: '1' }) });
  let stoppedErr = '';
  const stoppedCode = new Promise<number | null>((resolve) => stopped.on('close', (code) => resolve(code)));
  await new Promise<void>((resolve) => {
    stopped.stderr.on('data', (chunk: Buffer) => {
      stoppedErr += chunk.toString();
      const match = /migrate: ([\d,]+) \/ ([\d,]+) rows/.exec(stoppedErr);
      if (match && Number(match[1]!.replaceAll(',', '')) > 0) resolve();
    });
    stopped.on('close', () => resolve());
  });
  stopped.kill('SIGINT');
  assert.equal(await stoppedCode, 130, stoppedErr);
  assert.match(stoppedErr, /magpie migrate: stopped by SIGINT; nothing was committed to .* schema t_migrate_killed\w* \(the copy is one transaction\)/);
  for (const table of sqliteTables(dir)) assert.equal(await postgresCount(client, schema, table), 0, table);

  // Nothing left locked either: the same command runs through, without --force.
  const again = await migrate(['--data-dir', dir], root.path, schema);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(await postgresCount(client, schema, 'compaction_log'), sqliteRows(dir, 'compaction_log').rows.length);
});

test('bad flags and unusable targets are refused with what to do', { timeout: 120_000 }, async (t) => {
  const root = tempDir();
  t.after(() => root.remove());
  const schema = freshSchema('t_migrate_flags');
  const dir = await replayedDir(root.path, 'data', generateTranscript(6, { channels: 1 }), schema);
  const cases: Array<{ args: string[]; extra?: NodeJS.ProcessEnv; code: number; stderr: RegExp }> = [
    { args: ['--data-dir', dir], code: 2, stderr: /missing required option --to/ },
    { args: ['--to', 'mysql', '--data-dir', dir], code: 2, stderr: /--to must be 'postgres', got 'mysql'/ },
    { args: ['--to', 'postgresql', '--data-dir', dir], code: 2, stderr: /did you mean 'postgres'\?/ },
    { args: ['--too', 'postgres', '--data-dir', dir], code: 2, stderr: /unknown option '--too'; did you mean '--to'\?/ },
    { args: ['--to', 'postgres', '--data-dir', dir, '--schema', ''], code: 2, stderr: /--schema needs a plain identifier \(letters, digits and underscores/ },
    // The rule a connection holds the name to, before any connection is tried.
    { args: ['--to', 'postgres', '--data-dir', dir, '--schema', 'qa1-bad'], code: 2, stderr: /--schema needs a plain identifier .*got 'qa1-bad'/ },
    { args: ['--to', 'postgres', '--data-dir', dir, '--schema', 'x'.repeat(64)], code: 2, stderr: /--schema needs a plain identifier/ },
    { args: ['--to', 'postgres', '--data-dir', dir, 'extra'], code: 2, stderr: /unexpected argument: 'extra'/ },
    // The config says sqlite: the URL is wanted for --to postgres, and a missing one is a configuration problem (3).
    { args: ['--to', 'postgres', '--data-dir', dir], extra: { MAGPIE_DATABASE_URL: '' }, code: 3, stderr: /^magpie migrate: --to postgres needs the target database's connection URL in MAGPIE_DATABASE_URL, which is not set\n\s+hint: export MAGPIE_DATABASE_URL=/ },
    { args: ['--to', 'postgres', '--data-dir', join(root.path, 'nothing')], code: 1, stderr: /no Magpie data in .*nothing/ },
    { args: ['--to', 'postgres', '--data-dir', dir], extra: { MAGPIE_DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none' }, code: 1, stderr: /cannot use PostgreSQL at postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none/ },
  ];
  for (const { args, extra, code, stderr } of cases) {
    const run = await runMagpie(['migrate', ...args], { cwd: root.path, env: env(schema, extra) });
    assert.equal(run.code, code, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, stderr, args.join(' '));
    assert.doesNotMatch(run.stderr, /secret/);
  }
  const typo = await runMagpie(['migarte', '--to', 'postgres'], { cwd: root.path, env: env(schema) });
  assert.equal(typo.code, 2);
  assert.match(typo.stderr, /unknown command 'migarte' \(did you mean 'migrate'\?\)/);
  const help = await runMagpie(['migrate', '--help'], { cwd: root.path, env: env(schema) });
  assert.equal(help.code, 0);
  assert.match(help.stdout, /ONE transaction/);
});

test('memory search on the migrated schema finds what SQLite finds, through the data dir index files as they are', { timeout: 300_000 }, async (t) => {
  const client = await postgresOrSkip(t);
  if (!client) return;
  const root = tempDir();
  const schema = freshSchema('t_migrate_search');
  t.after(async () => {
    await dropSchema(client, schema);
    await client.end();
    root.remove();
  });
  const needle = { id: 'needle', channel: 'chan-1', author: 'ann', content: 'the lighthouse keeper painted the rowing boat vermilion' };
  const transcript = generateTranscript(200, { channels: 2 }).replace('\n', `\n${JSON.stringify(needle)}\n`);
  const dir = await replayedDir(root.path, 'data', transcript, schema);
  const migrated = await migrate(['--data-dir', dir], root.path, schema);
  assert.equal(migrated.code, 0, migrated.stderr);
  const search = (backend: string) =>
    runMagpie(['memory', 'search', 'who painted the boat vermilion', '--channel', 'chan-1', '--data-dir', dir, '--limit', '3', '--json'], {
      cwd: root.path,
      env: env(schema, { MAGPIE_STORAGE_BACKEND: backend }),
    });
  const first = (stdout: string) => (JSON.parse(stdout) as Array<{ id: string; message_id?: string; content: string }>)[0];
  const onSqlite = await search('sqlite');
  const onPostgres = await search('postgres');
  assert.equal(onSqlite.code, 0, onSqlite.stderr);
  assert.equal(onPostgres.code, 0, onPostgres.stderr);
  // The same item, under the same id, comes first on both stores.
  assert.match(first(onSqlite.stdout)?.content ?? '', /vermilion/);
  assert.equal(first(onPostgres.stdout)?.id, first(onSqlite.stdout)?.id);
  assert.equal(first(onPostgres.stdout)?.content, first(onSqlite.stdout)?.content);
  // No warning: the index file of chan-1 agreed with the copied index state and was used.
  assert.doesNotMatch(onPostgres.stderr, /was not used/);
  // The check is real: once the copied state disagrees with the file, the file is set aside.
  await client.query(`UPDATE "${schema}".memory_index_state SET point_count = point_count + 1 WHERE index_key LIKE '%chan-1'`);
  const disagreeing = await search('postgres');
  assert.equal(disagreeing.code, 0, disagreeing.stderr);
  assert.match(disagreeing.stderr, /vector index of .*chan-1 was not used \(index sidecar disagrees with the database\)/);
});
