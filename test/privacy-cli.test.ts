/**
 * `magpie memory forget` as a real process: `--user` erases everything one author wrote, in
 * every channel of a data dir, with the same propagation as a delete (summaries rewritten
 * without it, memories drawn only from it gone); a single archived message likewise; bad flags
 * are refused with the usage.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { SqlClient } from '../src/storage/sql-client.js';
import { tempDir } from './compaction-support.js';
import { runMagpie } from './support/magpie-process.js';
import { openTestDatabase } from './support/storage.js';

const AUTHORS = ['ann', 'ben', 'cho'];

/** Each author's messages carry words of their own (`anntoken12`), so copies can be traced. */
function transcript(count: number): string {
  const lines: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const author = AUTHORS[index % 3]!;
    lines.push(
      JSON.stringify({
        id: `m-${index}`,
        channel: `chan-${index % 2}`,
        author,
        content: `Note ${index}: ${author}token${index} says the ${['budget', 'deploy', 'release', 'invoice'][index % 4]} plan is ${'quite '.repeat(index % 5)}settled.`,
        ts: new Date(Date.UTC(2025, 0, 1) + index * 60_000).toISOString(),
      }),
    );
  }
  return `${lines.join('\n')}\n`;
}

async function copiesOf(db: SqlClient, text: string): Promise<number> {
  const like = `%${text}%`;
  const count = async (sql: string) => ((await db.prepare(sql).get(like)) as { total: number }).total;
  return (
    (await count('SELECT COUNT(*) AS total FROM history_entries WHERE content LIKE ?')) +
    (await count('SELECT COUNT(*) AS total FROM history_summaries WHERE content LIKE ?')) +
    (await count('SELECT COUNT(*) AS total FROM memory_items WHERE content LIKE ?'))
  );
}

describe('magpie memory forget', () => {
  const dir = tempDir();
  const dataDir = join(dir.path, 'data');
  const env = { ...process.env, MAGPIE_DATA_DIR: '' };
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir.path, env });

  before(async () => {
    const file = join(dir.path, 'transcript.jsonl');
    writeFileSync(file, transcript(120));
    const replay = await magpie(['replay', file, '--data-dir', dataDir, '--context-window', '2000', '--summarizer', 'extractive', '--json']);
    assert.equal(replay.code, 0, replay.stderr);
  });
  after(() => dir.remove());

  test('--user erases every message of that author in every channel, and every summary copy', async () => {
    const db = await openTestDatabase(dataDir);
    const summarized = (await db.prepare(`SELECT COUNT(*) AS total FROM history_summaries WHERE live = 1 AND kind = 'summary' AND content LIKE '%anntoken%'`).get()) as { total: number };
    assert.ok(summarized.total > 0, 'precondition: summaries quote ann');
    const before = ((await db.prepare(`SELECT COUNT(*) AS total FROM history_entries WHERE author_id = 'ben'`).get()) as { total: number }).total;
    await db.close();

    const run = await magpie(['memory', 'forget', '--user', 'ann', '--data-dir', dataDir, '--json']);
    assert.equal(run.code, 0, run.stderr);
    const result = JSON.parse(run.stdout) as { messages: number; channels: number; summaries_changed: number };
    assert.equal(result.messages, 40);
    assert.equal(result.channels, 2);
    assert.ok(result.summaries_changed > 0);
    // The audit line carries counts, neither the user nor their words.
    const audit = run.stderr.split('\n').find((line) => line.includes('"user_erased"'));
    assert.ok(audit, run.stderr);
    assert.ok(!audit.includes('"ann"') && !audit.includes('anntoken'), audit);
    assert.equal(JSON.parse(audit).messages, 40);

    const after = await openTestDatabase(dataDir);
    try {
      assert.equal(await copiesOf(after, 'anntoken'), 0, 'no copy of what ann wrote is left');
      assert.equal(((await after.prepare(`SELECT COUNT(*) AS total FROM history_entries WHERE author_id = 'ann'`).get()) as { total: number }).total, 0);
      assert.equal(((await after.prepare(`SELECT COUNT(*) AS total FROM history_entries WHERE author_id = 'ben'`).get()) as { total: number }).total, before, 'others keep theirs');
      assert.ok(await copiesOf(after, 'bentoken') > 0);
    } finally {
      await after.close();
    }
    const search = await magpie(['memory', 'search', 'anntoken30', '--channel', 'chan-0', '--data-dir', dataDir, '--json']);
    assert.equal(search.code, 0, search.stderr);
    assert.ok(!search.stdout.includes('anntoken'), search.stdout);

    const again = await magpie(['memory', 'forget', '--user', 'ann', '--data-dir', dataDir]);
    assert.equal(again.code, 0);
    assert.match(again.stderr, /nothing written by user 'ann'/);
  });

  test('an archived message id forgets that message everywhere it was copied', async () => {
    const db = await openTestDatabase(dataDir);
    const row = (await db.prepare(`SELECT rowid FROM memory_items WHERE message_id = 'm-4' AND kind = 'transcript'`).get()) as { rowid: number };
    assert.ok(await copiesOf(db, 'bentoken4 ') + await copiesOf(db, 'bentoken4:') > 0 || await copiesOf(db, 'bentoken4') > 0, 'precondition');
    await db.close();
    const run = await magpie(['memory', 'forget', `msg-${row.rowid}`, '--data-dir', dataDir]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /forgot msg-/);
    const after = await openTestDatabase(dataDir);
    try {
      // bentoken4 also prefixes bentoken40..49: look for the exact word.
      const left = await after
        .prepare(`SELECT content FROM history_entries WHERE content LIKE '%bentoken4 %' UNION ALL SELECT content FROM history_summaries WHERE content LIKE '%bentoken4 %' UNION ALL SELECT content FROM memory_items WHERE content LIKE '%bentoken4 %'`)
        .all();
      assert.deepEqual(left, []);
    } finally {
      await after.close();
    }
    const missing = await magpie(['memory', 'forget', 'msg-999999', '--data-dir', dataDir]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no memory or transcript entry with id 'msg-999999'/);
  });

  test('forget leaves the compaction log as it was: a replayed dir keeps its old-dated rows', async () => {
    const read = async () => {
      const db = await openTestDatabase(dataDir);
      try {
        return (await db.prepare('SELECT COUNT(*) AS total, MAX(id) AS last, MIN(at) AS first FROM compaction_log').get()) as { total: number; last: number; first: number };
      } finally {
        await db.close();
      }
    };
    const before = await read();
    assert.ok(before.total > 10, 'the replay logged its compactions');
    assert.ok(before.first < Date.UTC(2025, 1, 1), 'dated by the transcript, long before today');
    const run = await magpie(['memory', 'forget', '--user', 'cho', '--data-dir', dataDir]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(await read(), before);
  });

  test('bad flags are refused with the usage', async () => {
    for (const args of [
      ['memory', 'forget', '--data-dir', dataDir],
      ['memory', 'forget', 'msg-1', '--user', 'ben', '--data-dir', dataDir],
      ['memory', 'forget', '--user', 'two words', '--data-dir', dataDir],
      ['memory', 'forget', '--user', '', '--data-dir', dataDir],
      ['memory', 'forget', '--user'],
    ]) {
      const run = await magpie(args);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, /Usage: magpie memory forget/);
    }
    const nowhere = await magpie(['memory', 'forget', '--user', 'ben', '--data-dir', join(dir.path, 'nothing-here')]);
    assert.equal(nowhere.code, 1);
    assert.match(nowhere.stderr, /no Magpie data/);
  });
});
