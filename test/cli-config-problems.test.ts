/**
 * Configuration problems are named fully and exit 3: a config that is not UTF-8 (for every
 * command and the hot reload), an empty config path, every bad item of an id list, `nan` as
 * written, and a PostgreSQL backend without its URL (migrate with a message of its own). And a
 * dispatcher's mistyped `--help` is suggested like any other option.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { checkConfigText } from '../src/config/index.js';
import { tempDir } from './compaction-support.js';
import { waitFor, watchTestConfig } from './support/config-watch.js';
import { runMagpie } from './support/magpie-process.js';

/** SQLite pinned (a PostgreSQL test run must not lend the children its URL), no token, no data dir. */
function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, MAGPIE_DATA_DIR: '', MAGPIE_STORAGE_BACKEND: 'sqlite', ...extra };
}

/** "café" saved as Latin-1: one byte 0xE9, not UTF-8. */
const LATIN1 = Buffer.concat([Buffer.from('[defaults]\nsystem_prompt = "caf'), Buffer.from([0xe9]), Buffer.from('"\n')]);

test('a config that is not UTF-8 is refused with its line, by config check and by every command that loads it', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 'n.toml'), LATIN1);
  const check = await runMagpie(['config', 'check', 'n.toml'], { cwd: dir.path, env: env() });
  assert.equal(check.code, 3, check.stdout);
  assert.equal(check.stderr, 'n.toml: 1 problem\n  the file is not UTF-8, which TOML requires: save it as UTF-8 (line 2)\n');
  for (const args of [['status'], ['memory', 'stats'], ['replay', 'n.toml', '--data-dir', 'd'], ['report', '--out', 'r.html'], ['chat']]) {
    const run = await runMagpie([...args, '--config', 'n.toml'], { cwd: dir.path, env: env() });
    assert.equal(run.code, 3, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, /invalid config .*n\.toml: 1 problem\n\s+- the file is not UTF-8, which TOML requires: save it as UTF-8 \(line 2\)/, args.join(' '));
  }
  // A byte-order mark is still fine, and so is UTF-8 "café".
  writeFileSync(join(dir.path, 'ok.toml'), `\uFEFF[defaults]\nsystem_prompt = "café"\n`);
  assert.equal((await runMagpie(['config', 'check', 'ok.toml'], { cwd: dir.path, env: env() })).code, 0);

  const empty = await runMagpie(['config', 'check', ''], { cwd: dir.path, env: env() });
  assert.equal(empty.code, 3);
  assert.equal(empty.stderr, 'magpie config: invalid config FILE: 1 problem\n  - the config file path is empty\n');
});

test('checkConfigText on bytes decodes strictly; the hot reload refuses an edit that is not UTF-8', async (t) => {
  const result = checkConfigText(LATIN1);
  assert.equal(result.ok, false);
  assert.deepEqual(!result.ok && result.problems, [{ path: '', message: 'the file is not UTF-8, which TOML requires: save it as UTF-8', line: 2 }]);
  assert.equal(checkConfigText(Buffer.from('[defaults]\nsystem_prompt = "café"\n')).ok, true);

  const dir = tempDir();
  t.after(() => dir.remove());
  const { file, live, outcomes, watcher } = watchTestConfig(dir.path, 'live.toml', '[defaults]\nsystem_prompt = "tea"\n');
  t.after(() => watcher.close());
  writeFileSync(file, LATIN1);
  await waitFor(() => outcomes.some((outcome) => outcome.status === 'refused'), 'the refusal');
  assert.equal(live.current().defaults.systemPrompt, 'tea', 'the running prompt is not replaced by one with U+FFFD in it');
});

test('config check names every bad item of an id list, and nan as written', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(
    join(dir.path, 'b.toml'),
    '[discord]\nblocked_users = ["123", "abc", 2, "@bo", "99999999999999999999"]\n[defaults.compaction]\nemergency_threshold = nan\n[defaults]\nmax_agent_steps = inf\n',
  );
  const run = await runMagpie(['config', 'check', 'b.toml'], { cwd: dir.path, env: env() });
  assert.equal(run.code, 3);
  const lines = run.stderr.split('\n');
  assert.equal(lines[0], 'b.toml: 3 problems');
  assert.match(lines[1]!, /^ {2}discord\.blocked_users: items 2 and 4 are not Discord ids: ids are all digits .*names do not work here \(line 2\)$/);
  assert.match(lines[2]!, /^ {4}item 3 is a bare number; write Discord ids as quoted strings/);
  assert.match(lines[3]!, /^ {4}item 5 is not a Discord id: an id is a snowflake: 1 to 20 digits, below 2\^64/);
  assert.equal(lines[4], '  defaults.compaction.emergency_threshold: must be a number in (0, 1] (above 0, at most 1), got nan (line 4)');
  assert.equal(lines[5], '  defaults.max_agent_steps: must be a whole number at least 1, got inf (line 6)');
});

test('PostgreSQL without its URL is a configuration problem (exit 3) for every command; migrate says what it wants the URL for', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 'pg.toml'), '[storage]\nbackend = "postgres"\n');
  writeFileSync(join(dir.path, 't.jsonl'), '{"id":"m1","channel":"c1","author":"a","content":"hi"}\n');
  const pgEnv = env({ MAGPIE_STORAGE_BACKEND: '', DISCORD_TOKEN: 'not-a-real-token', MAGPIE_DATABASE_URL: '' });
  const commands = [['start'], ['chat'], ['replay', 't.jsonl', '--data-dir', 'dpg'], ['status'], ['report', '--out', 'r.html'], ['memory', 'stats'], ['memory', 'list']];
  for (const args of commands) {
    const run = await runMagpie([...args, '--config', 'pg.toml'], { cwd: dir.path, env: pgEnv, input: '' });
    assert.equal(run.code, 3, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, /\[storage\] backend = "postgres" needs a connection URL in MAGPIE_DATABASE_URL, which is not set\n\s+hint: export MAGPIE_DATABASE_URL=/, args.join(' '));
    // start and chat refuse before their metrics endpoint opens.
    assert.doesNotMatch(run.stdout, /metrics_listening/, args.join(' '));
  }
  // The config says sqlite (as before a move): the message is about --to postgres, not [storage].
  const migrate = await runMagpie(['migrate', '--to', 'postgres', '--data-dir', 'dpg'], { cwd: dir.path, env: env({ MAGPIE_DATABASE_URL: '' }) });
  assert.equal(migrate.code, 3, migrate.stderr);
  assert.match(migrate.stderr, /^magpie migrate: --to postgres needs the target database's connection URL in MAGPIE_DATABASE_URL, which is not set\n/);
  assert.doesNotMatch(migrate.stderr, /backend = "postgres"/);
});

test('a PostgreSQL URL that is no postgres:// URL is a configuration problem (exit 3) named as such, before any connection; its password is not shown', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  writeFileSync(join(dir.path, 'pg.toml'), '[storage]\nbackend = "postgres"\n');
  const cases: Array<[string, RegExp]> = [
    ['not-a-url', /got text that is not a URL\n/],
    ['mysql://magpie:s3cret@db.internal/magpie', /got 'mysql:\/\/magpie:\*\*\*@db\.internal\/magpie'\n/],
  ];
  for (const [url, shown] of cases) {
    for (const args of [['status'], ['chat'], ['migrate', '--to', 'postgres', '--data-dir', 'dpg']]) {
      const run = await runMagpie([...args, '--config', 'pg.toml'], { cwd: dir.path, env: env({ MAGPIE_STORAGE_BACKEND: '', MAGPIE_DATABASE_URL: url }), input: '' });
      assert.equal(run.code, 3, `${url} ${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, /MAGPIE_DATABASE_URL must hold a postgres:\/\/ or postgresql:\/\/ URL for \[storage\] backend = "postgres", /);
      assert.match(run.stderr, shown);
      assert.doesNotMatch(run.stderr, /s3cret|ENOTFOUND|connection lost/);
    }
  }
});

test('memory --hepl and config --hepl suggest --help; another option before the subcommand says to give one', async (t) => {
  const dir = tempDir();
  t.after(() => dir.remove());
  for (const command of ['memory', 'config']) {
    const run = await runMagpie([command, '--hepl'], { cwd: dir.path, env: env() });
    assert.equal(run.code, 2);
    assert.match(run.stderr, new RegExp(`^magpie ${command}: unknown option '--hepl'; did you mean '--help'\\?\\n`));
  }
  const option = await runMagpie(['memory', '--json'], { cwd: dir.path, env: env() });
  assert.equal(option.code, 2);
  assert.match(option.stderr, /unknown option '--json'; give a subcommand first \(search, list, forget, stats\), or --help/);
  const typo = await runMagpie(['memory', 'serch'], { cwd: dir.path, env: env() });
  assert.match(typo.stderr, /unknown subcommand 'serch'; did you mean 'search'\?/);
});
