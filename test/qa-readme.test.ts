import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { magpieEnv } from './support/magpie-process.js';

// The README promises these behaviours to operators; each test runs the real CLI.
const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

function run(args: string[], options: { cwd: string; env?: Record<string, string> }) {
  return spawnSync(process.execPath, [MAIN, ...args], {
    cwd: options.cwd,
    encoding: 'utf8',
    env: magpieEnv(args, { cwd: options.cwd, env: { PATH: process.env.PATH ?? '', HOME: options.cwd, ...options.env } }),
  });
}

test('start --help names every environment variable the README lists for the bot', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-qa-readme-'));
  try {
    const result = run(['start', '--help'], { cwd: dir });
    assert.equal(result.status, 0);
    for (const name of ['DISCORD_TOKEN', 'ANTHROPIC_API_KEY', 'LOG_LEVEL', 'MAGPIE_DATA_DIR', 'MAGPIE_DISCORD_API']) {
      assert.match(result.stdout, new RegExp(name), `start --help should mention ${name}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('memory commands find the data directory through MAGPIE_DATA_DIR when --data-dir is not given', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-qa-readme-'));
  try {
    const dataDir = path.join(dir, 'elsewhere');
    const lines = [
      { id: 'a1', channel: 'c1', author: 'ana', content: 'the release freeze starts on Friday' },
      { id: 'a2', channel: 'c1', author: 'bo', content: 'noted, postgres 16 it is' },
    ];
    writeFileSync(path.join(dir, 't.jsonl'), lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
    assert.equal(run(['replay', 't.jsonl', '--data-dir', dataDir], { cwd: dir }).status, 0);

    const stats = run(['memory', 'stats', '--json'], { cwd: dir, env: { MAGPIE_DATA_DIR: dataDir } });
    assert.equal(stats.status, 0, stats.stderr);
    assert.equal(JSON.parse(stats.stdout).transcript_entries, 2);

    const search = run(['memory', 'search', 'release freeze', '--channel', 'c1', '--json'], {
      cwd: dir,
      env: { MAGPIE_DATA_DIR: dataDir },
    });
    assert.equal(search.status, 0, search.stderr);
    assert.ok(JSON.parse(search.stdout).length >= 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
