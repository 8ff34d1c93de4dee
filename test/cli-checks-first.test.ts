/**
 * Usage errors are found before any work and before anything is written: a report that cannot
 * be written, a --compare dir that is not one, a --context-window that cannot work, bad shard
 * ids, an unreadable transcript, an --out in a missing directory. Each is refused with exit 2,
 * and the data dir is not created, nor any temp file left behind.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from './compaction-support.js';
import { MAGPIE_MAIN, magpieEnv, runMagpie } from './support/magpie-process.js';

const TRANSCRIPT = Array.from({ length: 30 }, (_, index) =>
  JSON.stringify({ id: `m${index}`, channel: 'c1', author: ['ana', 'bo', 'cy'][index % 3], content: `message ${index} about the blue widget` }),
).join('\n');

/** A clean environment: no token, no data dir from the caller's shell. */
function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, MAGPIE_DATA_DIR: '', ...extra };
}

test('replay --report DIR, report --out DIR and --compare nonexistent are refused before the replay, leaving nothing behind', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 't.jsonl'), TRANSCRIPT);
  mkdirSync(join(dir.path, 'out'));
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir.path, env: env() });

  const intoDir = await magpie(['replay', 't.jsonl', '--data-dir', 'd2', '--report', 'out']);
  assert.equal(intoDir.code, 2, intoDir.stderr);
  assert.match(intoDir.stderr, /^magpie replay: cannot write the report to .*\/out: it is a directory\n\s+hint: give --report a file name, such as out\/report\.html/);
  assert.equal(intoDir.stdout, '', 'no replay ran');

  const compare = await magpie(['replay', 't.jsonl', '--data-dir', 'd3', '--report', 'r.html', '--compare', 'nonexist']);
  assert.equal(compare.code, 2, compare.stderr);
  assert.match(compare.stderr, /--compare .*\/nonexist: no Magpie data there \(magpie\.sqlite not found, nor shard-<N> dirs holding one\)/);
  assert.equal(compare.stdout, '', 'no replay ran');

  // A real data dir to report on: its report cannot go over a directory (here, the data dir).
  assert.equal((await magpie(['replay', 't.jsonl', '--data-dir', 'd'])).code, 0);
  const overDir = await magpie(['report', '--data-dir', 'd', '--out', 'd']);
  assert.equal(overDir.code, 2, overDir.stderr);
  assert.match(overDir.stderr, /^magpie report: cannot write the report to .*\/d: it is a directory/);
  const reportCompare = await magpie(['report', '--data-dir', 'd', '--compare', 'nonexist', '--out', 'r.html']);
  assert.equal(reportCompare.code, 2, reportCompare.stderr);
  assert.match(reportCompare.stderr, /--compare .*\/nonexist: no Magpie data there/);

  const left = readdirSync(dir.path).sort();
  assert.deepEqual(left, ['d', 'out', 't.jsonl'], 'no data dir for a refused replay, no temp file, no report');
  assert.deepEqual(readdirSync(join(dir.path, 'out')), []);
});

test('replay --context-window is held to the rule config check holds context_window to', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 't.jsonl'), TRANSCRIPT);
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir.path, env: env() });

  for (const window of ['100', '1000', '1911']) {
    const run = await magpie(['replay', 't.jsonl', '--data-dir', 'd', '--context-window', window]);
    assert.equal(run.code, 2, `${window}: ${run.stderr}`);
    assert.match(
      run.stderr,
      new RegExp(
        `^magpie replay: --context-window ${window} is too small for max_response_tokens 1024: the thresholds apply to context_window - max_response_tokens = -?\\d+, ` +
          'and below emergency_threshold \\(0\\.95\\) that is \\d+ tokens, less than the 843 the emergency tier needs .*; give --context-window 1912 or more, or lower max_response_tokens in the config',
      ),
    );
    assert.match(run.stderr, /Usage: magpie replay/);
  }
  assert.equal(existsSync(join(dir.path, 'd')), false, 'refused before the data dir is written');
  // config check refuses the same window in the file, with the same explanation.
  writeFileSync(join(dir.path, 'small.toml'), '[defaults]\ncontext_window = 1000\n');
  const check = await magpie(['config', 'check', 'small.toml']);
  assert.equal(check.code, 3);
  assert.match(check.stderr, /max_response_tokens: 1024 leaves too little of context_window \(1000\): the thresholds apply to context_window - max_response_tokens = -24/);

  // The smallest window that works does; a config with a smaller answer room allows a smaller one.
  const smallest = await magpie(['replay', 't.jsonl', '--data-dir', 'd', '--context-window', '1912', '--json']);
  assert.equal(smallest.code, 0, smallest.stderr);
  writeFileSync(join(dir.path, 'room.toml'), '[defaults]\nmax_response_tokens = 256\n');
  const configured = await magpie(['replay', 't.jsonl', '--data-dir', 'd4', '--config', 'room.toml', '--context-window', '1200']);
  assert.equal(configured.code, 0, configured.stderr);
  // A channel of the config with a longer system prompt is the one that needs the most.
  writeFileSync(join(dir.path, 'prompt.toml'), `[channels."77"]\nsystem_prompt = "${'x'.repeat(4000)}"\n`);
  const channel = await magpie(['replay', 't.jsonl', '--data-dir', 'd5', '--config', 'prompt.toml', '--context-window', '2000']);
  assert.equal(channel.code, 2, channel.stderr);
  assert.match(channel.stderr, /--context-window 2000 is too small for max_response_tokens 1024 \(channel 77 of the config\): .*give --context-window 2886 or more/);

  // A window past every bound names the upper bound too, not only "at least 100".
  const huge = await magpie(['replay', 't.jsonl', '--data-dir', 'd', '--context-window', '99999999999999999999']);
  assert.equal(huge.code, 2);
  assert.match(huge.stderr, /--context-window needs a whole number of at least 100 and at most 9007199254740991, got '99999999999999999999'/);
});

test('start: a bad --shard-ids is a usage error before the missing token', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  for (const [ids, message] of [
    ['x', /--shard-ids must be shard numbers separated by commas, got 'x'/],
    ['3', /--shard-ids: shard 3 does not exist with 2 shards/],
    ['1,1', /--shard-ids names shard 1 twice/],
  ] as const) {
    const run = await runMagpie(['start', '--shards', '2', '--shard-ids', ids], { cwd: dir.path, env: env() });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, message);
    assert.doesNotMatch(run.stderr, /token/);
  }
  // With auto the count is Discord's: only the form is checked before the token.
  const auto = await runMagpie(['start', '--shards', 'auto', '--shard-ids', '0,x'], { cwd: dir.path, env: env() });
  assert.equal(auto.code, 2, auto.stderr);
  const noToken = await runMagpie(['start', '--shards', '2', '--shard-ids', '1'], { cwd: dir.path, env: env() });
  assert.equal(noToken.code, 3, 'good flags: then the token is missing');
  assert.match(noToken.stderr, /no Discord bot token/);
});

test('replay: an unreadable transcript is refused before the data dir is created', (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  const file = join(dir.path, 'u.jsonl');
  writeFileSync(file, TRANSCRIPT);
  chmodSync(file, 0o000);
  const args = ['replay', file, '--data-dir', join(dir.path, 'du')];
  // Root reads any file: run the child as nobody then (the temp dir lets it in), which needs a
  // checkout nobody may reach (a clone in a private temp dir is not).
  const asRoot = process.getuid?.() === 0;
  if (asRoot && !othersMayReach(MAGPIE_MAIN)) {
    t.skip('running as root in a checkout other users cannot reach: no unprivileged user can run the CLI here');
    return;
  }
  if (asRoot) chmodSync(dir.path, 0o777);
  const run = spawnSync(process.execPath, [MAGPIE_MAIN, ...args], {
    cwd: dir.path,
    env: magpieEnv(args, { cwd: dir.path, env: env() }),
    encoding: 'utf8',
    ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
  });
  assert.equal(run.status, 2, run.stderr);
  assert.match(run.stderr, /^magpie replay: cannot read the transcript .*u\.jsonl: permission denied\n\s+hint: give this user read access/);
  assert.equal(existsSync(join(dir.path, 'du')), false, 'no data dir');
});

test("replay - reads the transcript from stdin, and a transcript that is not there says '-' does", async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  const fromStdin = await runMagpie(['replay', '-', '--data-dir', 'd', '--json'], { cwd: dir.path, env: env(), input: TRANSCRIPT });
  assert.equal(fromStdin.code, 0, fromStdin.stderr);
  const summary = JSON.parse(fromStdin.stdout.trim().split('\n').at(-1)!) as { type: string; messages: number };
  assert.equal(summary.type, 'replay_summary');
  assert.equal(summary.messages, 30);
  // The same stdin again: every message is already there.
  const again = await runMagpie(['replay', '-', '--data-dir', 'd', '--json'], { cwd: dir.path, env: env(), input: TRANSCRIPT });
  assert.equal((JSON.parse(again.stdout.trim().split('\n').at(-1)!) as { duplicates: number }).duplicates, 30);
  const missing = await runMagpie(['replay', 'nothere.jsonl', '--data-dir', 'd'], { cwd: dir.path, env: env() });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /transcript not found: .*nothere\.jsonl\n\s+hint: give a JSONL file, or '-' to read the transcript from stdin/);
});

/** Whether every directory above `file` lets other users through (the x bit for others). */
function othersMayReach(file: string): boolean {
  for (let directory = dirname(file); ; directory = dirname(directory)) {
    if ((statSync(directory).mode & 0o001) === 0) return false;
    if (dirname(directory) === directory) return true;
  }
}

