/**
 * `magpie report` on the data dir of a sharded bot reads every `shard-<N>` dir, as status and the
 * memory commands do; and a damaged database gets the same words from status and report as from
 * the memory commands and replay.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { generateTranscript, tempDir } from './compaction-support.js';
import { runMagpie } from './support/magpie-process.js';

/** Shard dirs are SQLite's: pinned, so that a PostgreSQL test run does not move the children. */
function env(): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, MAGPIE_DATA_DIR: '', MAGPIE_STORAGE_BACKEND: 'sqlite' };
}

/** `count` lines of one channel, in the replay format. */
function channelTranscript(channel: string, count: number): string {
  return generateTranscript(count, { channels: 1 }).replaceAll('"chan-0"', JSON.stringify(channel)).replaceAll('"msg-', `"${channel}-msg-`);
}

test('report on a sharded data dir draws the channels of every shard', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir.path, env: env() });
  // Each shard holds its own channel, as a sharded bot's do; the window makes compaction fire.
  for (const [shard, channel] of [[0, 'alpha'], [1, 'beta']] as const) {
    writeFileSync(join(dir.path, `${channel}.jsonl`), channelTranscript(channel, 150));
    const replay = await magpie(['replay', `${channel}.jsonl`, '--data-dir', join('sh', `shard-${shard}`), '--context-window', '2000']);
    assert.equal(replay.code, 0, replay.stderr);
  }
  const status = await magpie(['status', '--data-dir', 'sh', '--json']);
  const statusChannels = (JSON.parse(status.stdout) as { channels: Array<{ channel_id: string }> }).channels.map((channel) => channel.channel_id);
  assert.deepEqual(statusChannels, ['alpha', 'beta']);

  const report = await magpie(['report', '--data-dir', 'sh', '--out', 'sh.html']);
  assert.equal(report.code, 0, report.stderr);
  assert.match(report.stderr, /report written to .*sh\.html \(sh: 2 channel\(s\), [1-9]\d* compaction\(s\)\)/);
  const html = readFileSync(join(dir.path, 'sh.html'), 'utf8');
  for (const channel of ['alpha', 'beta']) assert.match(html, new RegExp(channel), channel);
  assert.match(html, /shard-0, shard-1/, 'the report says which shard dirs it read');

  // --channel finds its channel in whichever shard holds it; a sharded --compare is read whole too.
  const one = await magpie(['report', '--data-dir', 'sh', '--channel', 'beta', '--out', 'beta.html']);
  assert.equal(one.code, 0, one.stderr);
  assert.match(one.stderr, /sh: 1 channel\(s\)/);
  const compared = await magpie(['report', '--data-dir', join('sh', 'shard-0'), '--compare', 'sh', '--out', 'both.html']);
  assert.equal(compared.code, 0, compared.stderr);
  assert.match(compared.stderr, /shard-0: 1 channel\(s\), .*; sh: 2 channel\(s\)/);
});

test('status and report on a damaged magpie.sqlite say it is damaged and how to restore it, as memory and replay do', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  mkdirSync(join(dir.path, 'bad'));
  // Not a database at all: what a disk that lost the file's header leaves.
  writeFileSync(join(dir.path, 'bad', 'magpie.sqlite'), Buffer.alloc(8192, 0x5a));
  writeFileSync(join(dir.path, 't.jsonl'), generateTranscript(5));
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir.path, env: env() });
  assert.equal((await magpie(['replay', 't.jsonl', '--data-dir', 'good'])).code, 0);
  const damaged = /the data directory .*\/bad holds a damaged database \(SQLITE_NOTADB: file is not a database\)\n\s+hint: stop Magpie, keep a copy of the data dir, and restore magpie\.sqlite from a backup/;
  for (const args of [
    ['status', '--data-dir', 'bad'],
    ['report', '--data-dir', 'bad', '--out', 'r.html'],
    ['report', '--data-dir', 'good', '--compare', 'bad', '--out', 'r.html'],
    ['memory', 'stats', '--data-dir', 'bad'],
    ['replay', 't.jsonl', '--data-dir', 'bad'],
  ]) {
    const run = await magpie(args);
    assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, damaged, args.join(' '));
    assert.doesNotMatch(run.stderr, /check the data dir's disk/, args.join(' '));
  }
});
