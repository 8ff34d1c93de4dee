import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFlags, UsageError } from '../src/cli/parse-flags.js';

const USAGE = 'Usage: magpie thing QUERY [--limit K]\n';
const OPTIONS = { limit: { type: 'string' }, json: { type: 'boolean' } } as const;

function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof UsageError, String(error));
    return error.message;
  }
  assert.fail('expected a UsageError');
}

describe('parseFlags edge cases', () => {
  it('an argument that starts with a dash is explained when the command takes arguments', () => {
    const message = messageOf(() => parseFlags(['-5 degrees'], { usage: USAGE, options: OPTIONS, positionals: { max: 1 } }));
    assert.match(message, /unknown option '-5'/);
    assert.match(message, /put it last, after '--'/);
    // ...and the advice works.
    const parsed = parseFlags(['--limit', '3', '--', '-5 degrees'], { usage: USAGE, options: OPTIONS, positionals: { max: 1 } });
    assert.deepEqual(parsed.positionals, ['-5 degrees']);
    assert.equal(parsed.values.limit, '3');
    // A command without arguments gets no such advice.
    assert.doesNotMatch(messageOf(() => parseFlags(['--nope'], { usage: USAGE, options: OPTIONS })), /after '--'/);
  });

  it('--flag=value, repeated flags (last wins), negative values only in the = form', () => {
    const parsed = parseFlags(['--limit=2', '--limit=-4'], { usage: USAGE, options: OPTIONS });
    assert.equal(parsed.values.limit, '-4');
    assert.match(messageOf(() => parseFlags(['--limit', '-4'], { usage: USAGE, options: OPTIONS })), /--limit=-XYZ/);
    assert.match(messageOf(() => parseFlags(['--json=yes'], { usage: USAGE, options: OPTIONS })), /does not take an argument/);
  });
});

describe('magpie help TOPIC', () => {
  it('an unknown topic is an unknown command (exit 2, with a suggestion), not a silent success', async () => {
    const { PassThrough } = await import('node:stream');
    const { runCli } = await import('../src/cli/run-cli.js');
    const { EXIT } = await import('../src/cli/command.js');
    const run = async (argv: string[]) => {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      let out = '';
      let err = '';
      stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
      const code = await runCli(argv, { stdout, stderr, stdin: new PassThrough(), env: {}, cwd: process.cwd() });
      await new Promise((resolve) => setImmediate(resolve));
      return { code, out, err };
    };
    const unknown = await run(['help', 'confg']);
    assert.equal(unknown.code, EXIT.usage);
    assert.match(unknown.err, /unknown command 'confg' \(did you mean 'config'\?\)/);
    const known = await run(['help', 'config']);
    assert.equal(known.code, EXIT.ok);
    assert.match(known.out, /Usage: magpie config check/);
  });
});
