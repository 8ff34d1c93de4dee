import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { projectRoot, runMagpie, type MagpieRun } from './support/magpie-process.js';

/** Runs the real `magpie` executable in a child process. */
function magpie(args: string[], options: { cwd?: string } = {}): Promise<MagpieRun> {
  return runMagpie(args, { cwd: options.cwd ?? temp, env: { ...process.env, LOG_LEVEL: 'silent', MAGPIE_DATA_DIR: '' } });
}

const temp = mkdtempSync(path.join(os.tmpdir(), 'magpie-cli-'));
after(() => rmSync(temp, { recursive: true, force: true }));

function writeConfig(name: string, text: string): string {
  const file = path.join(temp, name);
  writeFileSync(file, text);
  return file;
}

describe('magpie (top level)', () => {
  it('--help lists every command with its summary, exit 0', async () => {
    for (const flag of ['--help', '-h']) {
      const run = await magpie([flag]);
      assert.equal(run.code, 0);
      for (const command of ['start', 'chat', 'replay', 'memory', 'config']) {
        assert.match(run.stdout, new RegExp(`^  ${command} +\\S`, 'm'), `${command} listed`);
      }
    }
  });

  it('no arguments prints usage and exits 2', async () => {
    const run = await magpie([]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /Usage: magpie <command>/);
  });

  it('--version prints the package version', async () => {
    const run = await magpie(['--version']);
    assert.equal(run.code, 0);
    assert.match(run.stdout.trim(), /^\d+\.\d+\.\d+/);
  });

  it('an unknown command prints usage, suggests the closest, exits 2', async () => {
    const run = await magpie(['confg']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown command 'confg'.*did you mean 'config'/);
    assert.match(run.stderr, /Usage: magpie <command>/);
  });

  it('an unknown top-level flag exits 2', async () => {
    const run = await magpie(['--frobnicate']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown option '--frobnicate'/);
  });
});

describe('magpie config check', () => {
  it('the shipped config.toml is valid', async () => {
    const run = await magpie(['config', 'check', 'config.toml'], { cwd: projectRoot() });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /config OK: config\.toml/);
  });

  it('defaults to ./config.toml and accepts a missing default file (all defaults)', async () => {
    const empty = mkdtempSync(path.join(temp, 'empty-'));
    const run = await magpie(['config', 'check'], { cwd: empty });
    assert.equal(run.code, 0);
    assert.match(run.stdout, /config OK/);
  });

  it('a named file that does not exist exits 3', async () => {
    const run = await magpie(['config', 'check', 'missing.toml']);
    assert.equal(run.code, 3);
    assert.match(run.stderr, /not found/);
  });

  it('--help answers with usage, exit 0', async () => {
    const run = await magpie(['config', 'check', '--help']);
    assert.equal(run.code, 0);
    assert.match(run.stdout, /Usage: magpie config check \[FILE\]/);
  });

  it('an unknown flag prints usage, exit 2', async () => {
    const run = await magpie(['config', 'check', '--strict-mode']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown option '--strict-mode'/);
    assert.match(run.stderr, /Usage: magpie config check/);
  });

  it('an unknown subcommand exits 2', async () => {
    const run = await magpie(['config', 'lint']);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /unknown subcommand 'lint'/);
  });

  const badConfigs: Array<{ kind: string; text: string; expect: RegExp }> = [
    {
      kind: 'wrong type',
      text: '[defaults]\ncontext_window = "large"\n',
      expect: /defaults\.context_window: must be a whole number, got a string \(line 2\)/,
    },
    {
      kind: 'unknown key with a suggestion',
      text: '[defaults.compaction]\nagressive_threshold = 0.9\n',
      expect: /defaults\.compaction\.agressive_threshold: unknown key; did you mean `aggressive_threshold`\? \(line 2\)/,
    },
    {
      kind: 'out of range',
      text: '[defaults.compaction]\nemergency_threshold = 1.5\n',
      expect: /defaults\.compaction\.emergency_threshold: must be a number in \(0, 1\]/,
    },
    {
      kind: 'thresholds out of order',
      text: '[defaults.compaction]\nbackground_threshold = 0.9\naggressive_threshold = 0.85\n',
      expect: /defaults\.compaction\.background_threshold: 0\.9 must be below aggressive_threshold/,
    },
    {
      kind: 'thresholds out of order in a channel override',
      text: '[channels."123456789012345678".compaction]\nbackground_threshold = 0.9\n',
      expect: /channels\.123456789012345678\.compaction\.background_threshold: 0\.9 must be below aggressive_threshold \(0\.85, from \[defaults\.compaction\]\).*\(line 2\)/,
    },
    {
      kind: 'TOML syntax error',
      text: '[defaults]\ncontext_window = 1000\nsystem_prompt = "unterminated\n',
      expect: /TOML syntax error: .*\(line 3, column \d+\)/,
    },
    {
      kind: 'secret in the file',
      text: '[llm]\nmodel = "m"\napi_key = "sk-ant-do-not-print"\n',
      expect: /llm\.api_key: secrets must not be written in the config file.*ANTHROPIC_API_KEY/,
    },
  ];

  for (const bad of badConfigs) {
    it(`refuses ${bad.kind}: exit 3, naming the key`, async () => {
      const file = writeConfig(`${bad.kind.replaceAll(' ', '-')}.toml`, bad.text);
      const run = await magpie(['config', 'check', file]);
      assert.equal(run.code, 3, run.stderr);
      assert.match(run.stderr, bad.expect);
      assert.doesNotMatch(run.stderr, /do-not-print/);
      assert.equal(run.stdout, '');
    });
  }

  it('reports every problem of a file at once', async () => {
    const file = writeConfig(
      'many.toml',
      '[defaults]\ncontext_window = 0\nreply_policy = "never"\n[discord]\ntoken = "x"\n[loggin]\nlevel = "info"\n',
    );
    const run = await magpie(['config', 'check', file]);
    assert.equal(run.code, 3);
    assert.match(run.stderr, /4 problems/);
    for (const key of ['defaults.context_window', 'defaults.reply_policy', 'discord.token', 'loggin']) {
      assert.match(run.stderr, new RegExp(`^  ${key.replace('.', '\\.')}: `, 'm'));
    }
  });
});
