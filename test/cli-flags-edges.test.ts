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

  it('--flag=value, repeated flags (last wins), a negative number as a value in either form', () => {
    const parsed = parseFlags(['--limit=2', '--limit=-4'], { usage: USAGE, options: OPTIONS });
    assert.equal(parsed.values.limit, '-4');
    assert.equal(parseFlags(['--limit', '-4'], { usage: USAGE, options: OPTIONS }).values.limit, '-4');
    // Anything else starting with a dash is still an option, as node reads it.
    assert.match(messageOf(() => parseFlags(['--limit', '-x'], { usage: USAGE, options: OPTIONS })), /--limit=-XYZ/);
    assert.match(messageOf(() => parseFlags(['--json=yes'], { usage: USAGE, options: OPTIONS })), /does not take an argument/);
  });

  it('magpie replay --worker-lag -1 and memory search --limit -3 name the range, as a real process', async () => {
    const { runMagpie, projectRoot } = await import('./support/magpie-process.js');
    const env = { PATH: process.env.PATH ?? '', MAGPIE_DATA_DIR: '' };
    const lag = await runMagpie(['replay', 'missing.jsonl', '--data-dir', 'never-made', '--worker-lag', '-1'], { cwd: projectRoot(), env });
    assert.equal(lag.code, 2, lag.stderr);
    assert.match(lag.stderr, /^magpie replay: --worker-lag needs a whole number of at least 0, got '-1'\n/);
    const limit = await runMagpie(['memory', 'search', 'x', '--channel', 'c1', '--limit', '-3', '--data-dir', 'never-made'], { cwd: projectRoot(), env });
    assert.equal(limit.code, 2, limit.stderr);
    assert.match(limit.stderr, /--limit needs a whole number between 1 and 20, got '-3'/);
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
