/**
 * What a `magpie` command loads before it does anything: the commands an operator runs against
 * a SQLite data dir (memory, replay, export's flag checks, status) must not pay for discord.js,
 * the model SDK, the pg client, pino-pretty or prom-client, which each add a few hundred
 * milliseconds of CPU to every run (and to every script that calls them).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tempDir } from './compaction-support.js';

const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));
const HEAVY = ['discord.js', '@anthropic-ai/sdk', 'pg', 'pino-pretty', 'prom-client'];

/** The packages `magpie ARGS` resolved, recorded by a module hook in the child. */
function packagesLoaded(dir: string, args: string[]): { packages: Set<string>; code: number | null; stderr: string } {
  const log = join(dir, `loaded-${Math.random().toString(36).slice(2)}.txt`);
  const hooks = join(dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  const match = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(resolved.url);
  if (match) appendFileSync(process.env.LOADED_LOG, match[1] + '\\n');
  return resolved;
}
`,
  );
  const register = join(dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  writeFileSync(log, '');
  const result = spawnSync(process.execPath, ['--import', register, MAIN, ...args], {
    cwd: dir,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: dir, LOADED_LOG: log, MAGPIE_STORAGE_BACKEND: 'sqlite' },
  });
  return { packages: new Set(readFileSync(log, 'utf8').split('\n').filter(Boolean)), code: result.status, stderr: result.stderr };
}

test('commands on a SQLite data dir load none of the heavy libraries', () => {
  const dir = tempDir();
  try {
    const runs: Array<[string, string[]]> = [
      ['memory search', ['memory', 'search', 'watering rota', '--channel', '1', '--data-dir', join(dir.path, 'data')]],
      ['replay --help', ['replay', '--help']],
      ['export without a token', ['export', '--channel', '1', '--out', join(dir.path, 'out.jsonl')]],
      ['status --help', ['status', '--help']],
      ['--help', ['--help']],
    ];
    for (const [label, args] of runs) {
      const { packages, stderr } = packagesLoaded(dir.path, args);
      const heavy = HEAVY.filter((name) => packages.has(name));
      assert.deepEqual(heavy, [], `${label} loaded ${heavy.join(', ')} (${stderr.slice(0, 200)})`);
    }
  } finally {
    dir.remove();
  }
});

test('the hook sees what a command does load: start brings in discord.js', () => {
  const dir = tempDir();
  try {
    const { packages, code } = packagesLoaded(dir.path, ['start', '--help']);
    assert.equal(code, 0);
    assert.ok(packages.has('discord.js'), [...packages].join(', '));
    assert.ok(packages.has('better-sqlite3'), [...packages].join(', '));
  } finally {
    dir.remove();
  }
});

test('magpie --help lists every command with the summary its own --help starts from', async () => {
  const { COMMAND_LOADERS } = await import('../src/cli/run-cli.js');
  const { COMMAND_SUMMARIES } = await import('../src/cli/command-summaries.js');
  assert.deepEqual([...COMMAND_LOADERS.keys()], Object.keys(COMMAND_SUMMARIES));
  const help = spawnSync(process.execPath, [MAIN, '--help'], { encoding: 'utf8' });
  assert.equal(help.status, 0);
  for (const [name, load] of COMMAND_LOADERS) {
    const command = await load();
    assert.equal(command.name, name);
    const lines = help.stdout.split('\n');
    assert.ok(lines.some((line) => line.trim().startsWith(`${name} `) && line.endsWith(`  ${command.summary}`)), `${name} in --help`);
  }
});
