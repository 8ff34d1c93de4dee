import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FAKE_BOT_ID, startFakeDiscord, type FakeDiscord } from './fakes/fake-discord.js';
import { runMagpie } from './support/magpie-process.js';

const ALICE = '100000000000000001';
const BOB = '100000000000000002';
const GENERAL = '700000000000000001';
const EMPTY = '700000000000000002';

async function withDiscord(work: (discord: FakeDiscord, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-export-'));
  const discord = await startFakeDiscord({
    users: [
      { id: ALICE, username: 'alice' },
      { id: BOB, username: 'bob' },
    ],
    channels: [
      { id: GENERAL, name: 'general', type: 0 },
      { id: EMPTY, name: 'empty', type: 0 },
    ],
  });
  try {
    await work(discord, dir);
  } finally {
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function env(discord: FakeDiscord, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, DISCORD_TOKEN: 'test-token', MAGPIE_DISCORD_API: discord.restApi, ...extra };
}

/** 250 messages: alice and bob take turns, every fifth is the bot's answer. */
function seed(discord: FakeDiscord): string[] {
  const authors = [ALICE, BOB, ALICE, BOB, FAKE_BOT_ID];
  return discord.seedHistory(
    GENERAL,
    Array.from({ length: 250 }, (_, index) => ({
      authorId: authors[index % authors.length]!,
      content: `message number ${index} about the release plan and item ${index * 7}`,
    })),
  );
}

function readLines(file: string): Array<Record<string, unknown>> {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

test('magpie export pages through a channel oldest first, waits out a 429, and the file replays', async () => {
  await withDiscord(async (discord, dir) => {
    const ids = seed(discord);
    discord.rateLimitHistory(1, 0.2);
    const out = path.join(dir, 'general.jsonl');
    const run = await runMagpie(['export', '--channel', GENERAL, '--out', out], { cwd: dir, env: env(discord) });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, '', 'stdout stays empty when writing to a file');
    assert.match(run.stderr, new RegExp(`exported 250 messages from channel ${GENERAL} to .*general\\.jsonl; last id ${ids[249]}`));
    assert.doesNotMatch(run.stderr, /\r/, 'no progress line when stderr is not a terminal');

    const lines = readLines(out);
    assert.deepEqual(lines.map((line) => line.id), ids, 'every message, oldest first');
    assert.deepEqual(lines[0], {
      id: ids[0],
      channel: GENERAL,
      author: 'alice',
      content: 'message number 0 about the release plan and item 0',
      ts: lines[0]!.ts,
      role: 'user',
    });
    assert.ok(!Number.isNaN(Date.parse(String(lines[0]!.ts))));
    assert.equal(lines[4]!.role, 'assistant', "the bot's own messages are the assistant side");
    assert.equal(lines[4]!.author, 'magpie');
    assert.equal(lines.filter((line) => line.role === 'assistant').length, 50);

    const reads = discord.requests.filter((request) => request.method === 'GET' && request.path === `/channels/${GENERAL}/messages`);
    assert.equal(discord.historyRateLimited, 1, 'one 429 was sent');
    assert.equal(reads.length, 1 + 3, 'the rate-limited read was retried, then three pages of 100');

    const replay = await runMagpie(['replay', out, '--data-dir', path.join(dir, 'data'), '--context-window', '2000', '--json'], {
      cwd: dir,
      env: { PATH: process.env.PATH },
    });
    assert.equal(replay.code, 0, replay.stderr);
    const summary = JSON.parse(replay.stdout.trim().split('\n').at(-1)!) as { type: string; messages: number; channels: number };
    assert.equal(summary.type, 'replay_summary');
    assert.equal(summary.messages, 250);
    assert.equal(summary.channels, 1);
  });
});

test('magpie export --after continues from a message and --limit stops after N', async () => {
  await withDiscord(async (discord, dir) => {
    const ids = seed(discord);
    const out = path.join(dir, 'part.jsonl');
    const run = await runMagpie(['export', '--channel', GENERAL, '--out', out, '--after', ids[99]!, '--limit', '120'], {
      cwd: dir,
      env: env(discord),
    });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(readLines(out).map((line) => line.id), ids.slice(100, 220));

    const toStdout = await runMagpie(['export', '--channel', GENERAL, '--out', '-', '--limit', '3'], { cwd: dir, env: env(discord) });
    assert.equal(toStdout.code, 0, toStdout.stderr);
    assert.deepEqual(toStdout.stdout.trim().split('\n').map((line) => (JSON.parse(line) as { id: string }).id), ids.slice(0, 3));

    const empty = await runMagpie(['export', '--channel', EMPTY, '--out', path.join(dir, 'empty.jsonl')], { cwd: dir, env: env(discord) });
    assert.equal(empty.code, 0, empty.stderr);
    assert.equal(readFileSync(path.join(dir, 'empty.jsonl'), 'utf8'), '');
    assert.match(empty.stderr, /exported 0 messages/);
  });
});

test('magpie export refuses bad input and explains what Discord refused', async () => {
  await withDiscord(async (discord, dir) => {
    const out = path.join(dir, 'x.jsonl');
    const cases: Array<{ args: string[]; code: number; pattern: RegExp; env?: NodeJS.ProcessEnv }> = [
      { args: ['--out', out], code: 2, pattern: /missing required option --channel/ },
      { args: ['--channel', 'general', '--out', out], code: 2, pattern: /--channel needs a Discord channel id, a snowflake: 1 to 20 digits, below 2\^64 \(18446744073709551616\); 'general' is not all digits/ },
      // All digits is not enough: a snowflake is a 64-bit number, and the message says which rule failed.
      { args: ['--channel', '9'.repeat(26), '--out', out], code: 2, pattern: /--channel needs a Discord channel id, a snowflake: 1 to 20 digits, below 2\^64 .*; '9{26}' has 26 digits/ },
      { args: ['--channel', '18446744073709551616', '--out', out], code: 2, pattern: /'18446744073709551616' is 2\^64 or more/ },
      { args: ['--channel', GENERAL, '--out', out, '--after', '9'.repeat(21)], code: 2, pattern: /--after needs a Discord message id, a snowflake: .*has 21 digits/ },
      { args: ['--channel', GENERAL, '--out', out, '--limit', '9'.repeat(20)], code: 2, pattern: /--limit needs a whole number of at least 1 and at most 9007199254740991, got '9{20}'/ },
      // A missing directory is found before the token is looked for or Discord is asked anything.
      { args: ['--channel', GENERAL, '--out', path.join(dir, 'nodir', 'x.jsonl')], code: 2, pattern: /--out .*nodir.*: the directory .*nodir does not exist \(it is not created\)/, env: { PATH: process.env.PATH } },
      { args: ['--channel', GENERAL], code: 2, pattern: /missing required option --out/ },
      { args: ['--channel', GENERAL, '--out', out, '--after', 'yesterday'], code: 2, pattern: /--after needs a Discord message id/ },
      { args: ['--channel', GENERAL, '--out', out, '--limit', '0'], code: 2, pattern: /--limit needs a whole number of at least 1, got '0'/ },
      { args: ['--channel', GENERAL, '--out', dir], code: 2, pattern: /--out is a directory/ },
      { args: ['--channel', GENERAL, '--out', out, '--chanel', '1'], code: 2, pattern: /unknown option '--chanel'/ },
      { args: ['--channel', GENERAL, '--out', out], code: 3, pattern: /DISCORD_TOKEN is not set/, env: { PATH: process.env.PATH } },
      { args: ['--channel', '799999999999999999', '--out', out], code: 1, pattern: /Discord does not know it \(404 Unknown Channel\)[\s\S]*hint: check the channel id/ },
    ];
    for (const entry of cases) {
      const run = await runMagpie(['export', ...entry.args], { cwd: dir, env: entry.env ?? env(discord) });
      assert.equal(run.code, entry.code, `${entry.args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, entry.pattern, entry.args.join(' '));
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    }
    assert.throws(() => readFileSync(out), /ENOENT/, 'a refused export leaves no file behind');
  });
});

test('export progress: count, rate and waits on one line for a terminal, nothing otherwise', async () => {
  const { ExportProgress } = await import('../src/export/export-progress.js');
  const { Writable } = await import('node:stream');
  const sink = (isTTY: boolean) => {
    const chunks: string[] = [];
    const stream = new Writable({ write: (chunk, _encoding, done) => (chunks.push(String(chunk)), done()) });
    Object.assign(stream, { isTTY });
    return { stream, chunks };
  };
  let now = 0;
  const terminal = sink(true);
  const progress = new ExportProgress(terminal.stream, () => now);
  now = 1000;
  progress.update(100);
  now = 1100;
  progress.update(150);
  now = 2000;
  progress.rateLimited(1500);
  progress.update(400);
  progress.finish();
  assert.deepEqual(terminal.chunks, [
    '\r\u001b[2K100 messages exported (100/s)',
    '\r\u001b[2Krate limited by Discord: waiting 2 s',
    '\r\u001b[2K400 messages exported (200/s, waited for Discord 1×)',
    '\r\u001b[2K',
  ]);
  const piped = sink(false);
  const quiet = new ExportProgress(piped.stream, () => now);
  quiet.update(10);
  quiet.rateLimited(100);
  quiet.finish();
  assert.deepEqual(piped.chunks, []);
});
