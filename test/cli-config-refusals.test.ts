/**
 * Settings the runtime would refuse are refused by `config check` and by every command that
 * loads the config, as invalid configuration (exit 3) with the key and its line: a PostgreSQL
 * schema name that is not a plain identifier (in the file or in MAGPIE_STORAGE_SCHEMA), and a
 * config.toml that is a broken symbolic link (not "no file, every default"), and a channel
 * override whose key is not a Discord id. A refused [defaults] value is reported once, not
 * again through a channel that inherits the default standing in for it.
 */
import assert from 'node:assert/strict';
import { symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { tempDir } from './compaction-support.js';
import { runMagpie } from './support/magpie-process.js';

/** SQLite pinned (a PostgreSQL test run must not lend the children its URL), no token, no data dir. */
function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, MAGPIE_DATA_DIR: '', MAGPIE_STORAGE_BACKEND: 'sqlite', ...extra };
}

test('a schema name PostgreSQL would not be given is refused by config check and by the commands, from the file or the environment', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 'pgbad.toml'), '[storage]\nbackend = "postgres"\nschema = "qa1-bad"\n');
  writeFileSync(join(dir.path, 'pglong.toml'), `[storage]\nbackend = "postgres"\n\nschema = "${'s'.repeat(64)}"\n`);
  const bad = await runMagpie(['config', 'check', 'pgbad.toml'], { cwd: dir.path, env: env() });
  assert.equal(bad.code, 3, bad.stdout);
  assert.equal(
    bad.stderr,
    'pgbad.toml: 1 problem\n  storage.schema: "qa1-bad" is not a plain identifier; use letters, digits and underscores (at most 63), starting with a letter or underscore, not with pg_ (line 3)\n',
  );
  const long = await runMagpie(['config', 'check', 'pglong.toml'], { cwd: dir.path, env: env() });
  assert.equal(long.code, 3, long.stdout);
  assert.match(long.stderr, /storage\.schema: is 64 characters long; use letters, digits and underscores \(at most 63\).* \(line 4\)\n$/);

  // The URL is set and points nowhere: the name is refused before any connection is tried.
  const pgEnv = env({ MAGPIE_STORAGE_BACKEND: '', MAGPIE_DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
  for (const args of [['status'], ['memory', 'stats']]) {
    const run = await runMagpie([...args, '--config', 'pgbad.toml'], { cwd: dir.path, env: pgEnv });
    assert.equal(run.code, 3, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, /invalid config .*pgbad\.toml: 1 problem\n\s+- storage\.schema: "qa1-bad" is not a plain identifier.*\(line 3\)/, args.join(' '));
  }

  const fromEnv = await runMagpie(['status'], { cwd: dir.path, env: { ...pgEnv, MAGPIE_STORAGE_SCHEMA: 'qa1-bad' } });
  assert.equal(fromEnv.code, 3, fromEnv.stderr);
  assert.match(fromEnv.stderr, /^magpie status: invalid config MAGPIE_STORAGE_SCHEMA: 1 problem\n\s+- MAGPIE_STORAGE_SCHEMA: "qa1-bad" is not a plain identifier; use letters/);
});

test('a config.toml that is a broken symbolic link is refused, not read as no file at all', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  const target = join(dir.path, 'magpie-missing', 'config.toml');
  symlinkSync(target, join(dir.path, 'config.toml'));
  const check = await runMagpie(['config', 'check'], { cwd: dir.path, env: env() });
  assert.equal(check.code, 3, check.stdout);
  assert.equal(check.stdout, '');
  assert.equal(
    check.stderr,
    `magpie config: invalid config ./config.toml: 1 problem\n  - config file ${join(dir.path, 'config.toml')} is a broken symbolic link: its target ${target} does not exist; fix the link or remove it\n`,
  );
  for (const args of [['config', 'check', 'config.toml'], ['status'], ['memory', 'stats'], ['status', '--config', 'config.toml']]) {
    const run = await runMagpie(args, { cwd: dir.path, env: env() });
    assert.equal(run.code, 3, `${args.join(' ')}: ${run.stdout}${run.stderr}`);
    assert.match(run.stderr, /is a broken symbolic link: its target .*magpie-missing\/config\.toml does not exist/, args.join(' '));
  }
});

test('config check names a missing file the way every other command does', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  const check = await runMagpie(['config', 'check', 'nope.toml'], { cwd: dir.path, env: env() });
  assert.equal(check.code, 3);
  assert.equal(check.stderr, `magpie config: invalid config nope.toml: 1 problem\n  - config file not found: ${join(dir.path, 'nope.toml')}\n`);
  const status = await runMagpie(['status', '--config', 'nope.toml'], { cwd: dir.path, env: env() });
  assert.equal(status.code, 3);
  assert.match(status.stderr, /^magpie status: invalid config .*nope\.toml: 1 problem\n  - config file not found: /);
});

test('a channel override whose key is not a Discord id is refused with its line', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 'ch.toml'), '[channels."general"]\nreply_policy = "always"\n\n[channels."123\\n"]\nvision = false\n[channels."123456789012345678"]\nvision = false\n');
  const check = await runMagpie(['config', 'check', 'ch.toml'], { cwd: dir.path, env: env() });
  assert.equal(check.code, 3, check.stdout);
  const lines = check.stderr.split('\n');
  assert.equal(lines[0], 'ch.toml: 2 problems');
  assert.match(lines[1]!, /^ {2}channels\.general: is not a channel id: an id is a snowflake: 1 to 20 digits, below 2\^64 .* \(line 1\)$/);
  assert.match(lines[2]!, /^ {2}channels\."123\\n": is not a channel id: .* \(line 4\)$/);
  const status = await runMagpie(['status', '--config', 'ch.toml'], { cwd: dir.path, env: env() });
  assert.equal(status.code, 3, status.stderr);
  assert.match(status.stderr, /- channels\.general: is not a channel id/);
});

test('a refused [defaults] value gives one error, not a second one on a channel against the built-in default', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 'c.toml'), '[defaults.compaction]\naggressive_threshold = "high"\n\n[channels."111".compaction]\nbackground_threshold = 0.9\n');
  const check = await runMagpie(['config', 'check', 'c.toml'], { cwd: dir.path, env: env() });
  assert.equal(check.code, 3, check.stdout);
  assert.equal(check.stderr, 'c.toml: 1 problem\n  defaults.compaction.aggressive_threshold: must be a number in (0, 1] (above 0, at most 1), got a string (line 2)\n');
});
