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
