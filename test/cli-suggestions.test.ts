/** "Did you mean" everywhere, through the real CLI: commands, subcommands, options, config keys. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runMagpie } from './support/magpie-process.js';

test('typos get the closest name, then the one usage line and where the full help is', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-suggest-'));
  const env = { PATH: process.env.PATH, HOME: dir };
  const magpie = (args: string[]) => runMagpie(args, { cwd: dir, env });
  try {
    writeFileSync(path.join(dir, 'typo.toml'), '[llm]\nmodle = "x"\n');
    const cases: Array<{ args: string[]; code: number; says: RegExp }> = [
      { args: ['stauts'], code: 2, says: /unknown command 'stauts' \(did you mean 'status'\?\)/ },
      { args: ['memory', 'serch', 'x'], code: 2, says: /unknown subcommand 'serch'; did you mean 'search'\?/ },
      { args: ['config', 'chek'], code: 2, says: /unknown subcommand 'chek'; did you mean 'check'\?/ },
      { args: ['replay', '--hepl'], code: 2, says: /unknown option '--hepl'; did you mean '--help'\?/ },
      { args: ['memory', 'list', '--limt', '3'], code: 2, says: /unknown option '--limt'; did you mean '--limit'\?/ },
      { args: ['config', 'check', 'typo.toml'], code: 3, says: /llm\.modle: unknown key; did you mean `model`\?/ },
    ];
    for (const { args, code, says } of cases) {
      const run = await magpie(args);
      assert.equal(run.code, code, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, says, args.join(' '));
      if (code === 2) {
        assert.match(run.stderr, /Run 'magpie[a-z ]* --help' for (every option|the commands)\./, `${args.join(' ')} points at the full help`);
        assert.doesNotMatch(run.stderr, /Options:/, `${args.join(' ')} does not print the whole help`);
        assert.ok(run.stderr.split('\n').length <= 6, `${args.join(' ')}: short:\n${run.stderr}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('every --help reads cleanly: no prose line over 100 characters, no stray runs of spaces', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-help-'));
  try {
    const commands = [['start'], ['chat'], ['replay'], ['memory'], ['memory', 'search'], ['memory', 'list'], ['memory', 'forget'], ['memory', 'stats'], ['config', 'check'], ['status'], ['report'], ['export'], ['migrate']];
    for (const command of commands) {
      const run = await runMagpie([...command, '--help'], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } });
      assert.equal(run.code, 0, `${command.join(' ')} --help: ${run.stderr}`);
      for (const line of run.stdout.split('\n')) {
        // The synopsis lists every flag on one line, as usage lines do; the rest wraps.
        const synopsis = /^(Usage:|\s+magpie )/.test(line);
        if (!synopsis) assert.ok(line.length <= 100, `${command.join(' ')} --help: a line of ${line.length}: ${line}`);
        // Prose starts at the margin; aligned columns (options, examples) are indented.
        if (!/^\s/.test(line)) assert.doesNotMatch(line, /\S {2,}\S/, `${command.join(' ')} --help: ${line}`);
        assert.doesNotMatch(line, /\S {4,}--/, `${command.join(' ')} --help: a line continuation lost its break: ${line}`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
