import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore } from '../src/memory/index.js';
import { runMagpie, type MagpieRun } from './support/magpie-process.js';
import { openTestDatabase, TEST_STORAGE } from './support/storage.js';


function magpie(args: string[], options: { cwd: string; stdin?: string }): Promise<MagpieRun> {
  const env = { ...process.env, MAGPIE_DATA_DIR: '' };
  return runMagpie(args, { cwd: options.cwd, env, ...(options.stdin === undefined ? {} : { input: options.stdin }) });
}

describe('magpie memory (real process)', () => {
  let work: string;
  let dataDir: string;

  before(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
    dataDir = path.join(work, 'data');
    const db = await openTestDatabase(dataDir);
    const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
    await store.archiveTranscript([
      { channelId: 'c1', messageId: 'd1', authorId: 'a', authorName: 'Jo', content: 'Our flight to Osaka leaves at 7am', createdAt: 1_000 },
      { channelId: 'c1', messageId: 'd2', authorId: 'b', authorName: 'Kim', content: 'I will bring the rail passes', createdAt: 2_000 },
      { channelId: 'c2', messageId: 'e1', authorId: 'c', authorName: 'Lu', content: 'Osaka secret of another channel', createdAt: 3_000 },
    ]);
    await store.save({ location: { channelId: 'c1' }, content: 'Jo is afraid of flying', memoryType: 'fact' });
    await store.close();
    await db.close();
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('search QUERY --channel --json returns the documented result shape, scoped to the channel', async () => {
    const { code, stdout, stderr } = await magpie(['memory', 'search', 'flight to Osaka', '--data-dir', dataDir, '--channel', 'c1', '--json'], { cwd: work });
    assert.equal(code, 0, stderr);
    const results = JSON.parse(stdout) as Array<{
      content: string;
      source_ids: string[];
      kind: string;
      score: number;
      message_id: string;
      author: string;
      created_at: string;
      neighbors: Array<{ position: string; message_id: string; author: string; content: string }>;
    }>;
    // The matched message is named on its own; its neighbour is a separate, labelled line.
    assert.equal(results[0]!.content, 'Jo: Our flight to Osaka leaves at 7am');
    assert.equal(results[0]!.message_id, 'd1');
    assert.equal(results[0]!.author, 'Jo');
    assert.match(results[0]!.created_at, /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(results[0]!.neighbors.map(({ position, message_id, author, content }) => ({ position, message_id, author, content })), [
      { position: 'after', message_id: 'd2', author: 'Kim', content: 'I will bring the rail passes' },
    ]);
    assert.deepEqual(results[0]!.source_ids, ['d1', 'd2']);
    assert.ok(!results.some((result) => result.content.includes('another channel')));
  });

  test('search without --json names a transcript hit by its platform message id; the archive id is there to forget it', async () => {
    const { code, stdout, stderr } = await magpie(['memory', 'search', 'flight to Osaka', '--data-dir', dataDir, '--channel', 'c1', '--kind', 'transcript'], { cwd: work });
    assert.equal(code, 0, stderr);
    const header = stdout.split('\n')[0]!;
    assert.match(header, /^1\. \d\.\d{3}  transcript  message d1  \d{4}-\d\d-\d\dT\S+  sources d1, d2  \(forget: msg-\d+\)$/);
    assert.match(stdout, /\n   match  d1  \S+  Jo: Our flight to Osaka leaves at 7am\n/);
    // The id shown for forgetting is the one `memory forget` takes.
    const internal = /\(forget: (msg-\d+)\)/.exec(header)![1]!;
    const listed = await magpie(['memory', 'list', '--data-dir', dataDir, '--channel', 'c1', '--kind', 'transcript'], { cwd: work });
    assert.match(listed.stdout, new RegExp(`^${internal}  .*\\n  Jo: Our flight to Osaka`, 'm'));
  });

  test('search --queries runs every line and reports bad lines by number, exiting 1', async () => {
    const queries = path.join(work, 'queries.jsonl');
    writeFileSync(
      queries,
      [
        JSON.stringify({ id: 'q1', channel: 'c1', query: 'rail passes', limit: 2 }),
        '{ not json',
        JSON.stringify({ id: 'q3', channel: 'c1', query: 'Osaka', limit: 50 }),
        JSON.stringify({ id: 'q4', channel: 'c2', query: 'Osaka' }),
      ].join('\n'),
    );
    const { code, stdout } = await magpie(['memory', 'search', '--data-dir', dataDir, '--queries', queries, '--json'], { cwd: work });
    assert.equal(code, 1);
    const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.equal(lines.length, 4);
    assert.equal(lines[0]!.id, 'q1');
    assert.deepEqual((lines[0]!.results as Array<{ source_ids: string[] }>)[0]!.source_ids, ['d1', 'd2']);
    assert.equal(lines[1]!.line, 2);
    assert.match(String(lines[1]!.error), /line 2: not valid JSON/);
    assert.equal(lines[2]!.id, 'q3');
    assert.match(String(lines[2]!.error), /line 3: "limit" must be an integer from 1 to 20/);
    assert.deepEqual((lines[3]!.results as Array<{ source_ids: string[] }>)[0]!.source_ids, ['e1']);
  });

  test('search --queries: --channel and --limit are the defaults of lines without their own; an id JSON rounds is refused', async () => {
    const queries = path.join(work, 'defaults.jsonl');
    writeFileSync(
      queries,
      [
        JSON.stringify({ id: 'own', channel: 'c2', query: 'Osaka', limit: 2 }),
        JSON.stringify({ id: 'default', query: 'Osaka' }),
        '{"id":12345678901234567891,"channel":"c1","query":"Osaka"}',
        '{"id":9007199254740991,"channel":"c1","query":"Osaka"}',
      ].join('\n'),
    );
    const run = await magpie(['memory', 'search', '--data-dir', dataDir, '--queries', queries, '--channel', 'c1', '--limit', '1', '--json'], { cwd: work });
    assert.equal(run.code, 1, run.stderr);
    const lines = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as { id?: unknown; line?: number; error?: string; results?: Array<{ channel_id?: string; source_ids: string[] }> });
    assert.deepEqual(lines[0]!.results!.map((result) => result.source_ids), [['e1']], 'its own channel, c2');
    assert.equal(lines[1]!.id, 'default');
    assert.equal(lines[1]!.results!.length, 1, '--limit 1, not the default 5');
    assert.ok(lines[1]!.results![0]!.source_ids.includes('d1') && !lines[1]!.results![0]!.source_ids.includes('e1'), '--channel c1');
    assert.deepEqual(lines[2], {
      line: 3,
      error: 'line 3: "id" is a number past 2^53 or not whole (read as 12345678901234567000), which JSON readers round; write the id as a string, in quotes',
    });
    assert.equal(lines[3]!.id, 9_007_199_254_740_991, 'the largest safe integer is still an id');

    // Without --channel, a line without one is an error line naming the flag.
    const bare = await magpie(['memory', 'search', '--data-dir', dataDir, '--queries', '-', '--json'], { cwd: work, stdin: `${JSON.stringify({ id: 'x', query: 'Osaka' })}\n` });
    assert.equal(bare.code, 1);
    assert.match(bare.stdout, /"line 1: \\"channel\\" is missing; give it on the line, or --channel for every line without one"/);
  });

  test('a query is counted in characters, not UTF-16 units; --kind transcript --type is refused', async () => {
    const emoji = '\u{1F600}';
    const fits = await magpie(['memory', 'search', emoji.repeat(2000), '--data-dir', dataDir, '--channel', 'c1', '--json'], { cwd: work });
    assert.equal(fits.code, 0, fits.stderr);
    const over = await magpie(['memory', 'search', emoji.repeat(2001), '--data-dir', dataDir, '--channel', 'c1'], { cwd: work });
    assert.equal(over.code, 2);
    assert.match(over.stderr, /QUERY is 2001 characters long; the limit is 2000/);
    const batch = await magpie(['memory', 'search', '--data-dir', dataDir, '--queries', '-', '--json'], {
      cwd: work,
      stdin: `${JSON.stringify({ id: 'e', channel: 'c1', query: emoji.repeat(1001) })}\n`,
    });
    assert.equal(batch.code, 0, batch.stdout);

    for (const mode of [['Osaka', '--channel', 'c1'], ['--queries', '-', '--json']]) {
      const both = await magpie(['memory', 'search', ...mode, '--data-dir', dataDir, '--kind', 'transcript', '--type', 'fact'], { cwd: work, stdin: '' });
      assert.equal(both.code, 2, both.stderr);
      assert.match(both.stderr, /--type fact selects memories, and --kind transcript leaves them out/);
    }
  });

  test('a queries file may start with a byte-order mark', async () => {
    const queries = path.join(work, 'bom.jsonl');
    writeFileSync(queries, '\uFEFF' + JSON.stringify({ id: 'q1', channel: 'c1', query: 'rail passes' }) + '\n');
    const { code, stdout, stderr } = await magpie(['memory', 'search', '--data-dir', dataDir, '--queries', queries, '--json'], { cwd: work });
    assert.equal(code, 0, stderr);
    const line = JSON.parse(stdout.trim()) as { id: string; results: Array<{ source_ids: string[] }> };
    assert.equal(line.id, 'q1');
    assert.ok(line.results[0]!.source_ids.includes('d2'));
  });

  test('no results in a channel with no data names the channels that have some', async () => {
    const { code, stdout, stderr } = await magpie(['memory', 'search', 'Osaka', '--data-dir', dataDir, '--channel', 'c9'], { cwd: work });
    assert.equal(code, 0);
    assert.match(stdout, /no results/);
    assert.match(stderr, /nothing is stored for channel 'c9'; channels with data: c\d, c\d/);
  });

  test('list, stats and forget', async () => {
    const list = await magpie(['memory', 'list', '--data-dir', dataDir, '--channel', 'c1', '--kind', 'memory', '--json'], { cwd: work });
    assert.equal(list.code, 0, list.stderr);
    const records = list.stdout.trim().split('\n').map((line) => JSON.parse(line) as { id: string; content: string });
    assert.equal(records.length, 1);
    assert.equal(records[0]!.content, 'Jo is afraid of flying');

    const stats = await magpie(['memory', 'stats', '--data-dir', dataDir, '--json'], { cwd: work });
    assert.equal(stats.code, 0, stats.stderr);
    const parsed = JSON.parse(stats.stdout) as { memories: number; transcript_entries: number; embedder: string };
    assert.deepEqual([parsed.memories, parsed.transcript_entries, parsed.embedder], [1, 3, 'hash-v2']);

    const forget = await magpie(['memory', 'forget', records[0]!.id, '--data-dir', dataDir], { cwd: work });
    assert.equal(forget.code, 0, forget.stderr);
    const again = await magpie(['memory', 'forget', records[0]!.id, '--data-dir', dataDir], { cwd: work });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /no memory or transcript entry/);
  });

  test('a missing data dir is a clear error and is not created', async () => {
    const missing = path.join(work, 'nowhere');
    const { code, stderr } = await magpie(['memory', 'search', 'x', '--data-dir', missing, '--channel', 'c1'], { cwd: work });
    assert.equal(code, 1);
    // On PostgreSQL the data lives in the dir's schema, which no writer created.
    assert.match(stderr, TEST_STORAGE === 'postgres' ? /no complete Magpie schema in postgres:/ : /no Magpie data in .*nowhere/);
    assert.equal(existsSync(missing), false);
  });

  test('bad flags exit 2 with usage; --help exits 0', async () => {
    const unknown = await magpie(['memory', 'search', 'x', '--bogus'], { cwd: work });
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /Usage: magpie memory search/);
    const noChannel = await magpie(['memory', 'search', 'x', '--data-dir', dataDir], { cwd: work });
    assert.equal(noChannel.code, 2);
    assert.match(noChannel.stderr, /--channel/);
    const badLimit = await magpie(['memory', 'search', 'x', '--data-dir', dataDir, '--channel', 'c1', '--limit', '99'], { cwd: work });
    assert.equal(badLimit.code, 2);
    for (const sub of ['search', 'list', 'forget', 'stats']) {
      const help = await magpie(['memory', sub, '--help'], { cwd: work });
      assert.equal(help.code, 0);
      assert.match(help.stdout, new RegExp(`Usage: magpie memory ${sub}`));
    }
    const bare = await magpie(['memory'], { cwd: work });
    assert.equal(bare.code, 2);
  });
});
