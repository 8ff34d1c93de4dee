import assert from 'node:assert/strict';
import { describe, it, test } from 'node:test';
import { integerFlag, parseFlags, requireFlag, unknownSubcommand, UsageError } from '../src/cli/parse-flags.js';

const USAGE = 'Usage: magpie example FILE --data-dir DIR [--limit K] [--json]\n';
const OPTIONS = {
  'data-dir': { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
} as const;

function usageError(run: () => unknown, message: RegExp): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof UsageError);
    assert.match(error.message, message);
    assert.equal(error.usage, USAGE);
    assert.match(error.render(), /Usage: magpie example/);
    return true;
  });
}

describe('parseFlags', () => {
  it('returns typed values and positionals', () => {
    const parsed = parseFlags(['a.jsonl', '--data-dir', '/tmp/x', '--json'], {
      usage: USAGE,
      options: OPTIONS,
      positionals: { min: 1, max: 1 },
    });
    const dataDir: string | undefined = parsed.values['data-dir'];
    const json: boolean | undefined = parsed.values.json;
    assert.equal(parsed.help, false);
    assert.equal(dataDir, '/tmp/x');
    assert.equal(json, true);
    assert.deepEqual(parsed.positionals, ['a.jsonl']);
  });

  it('--help and -h set help and skip positional checks', () => {
    for (const flag of ['--help', '-h']) {
      assert.equal(parseFlags([flag], { usage: USAGE, options: OPTIONS, positionals: { min: 1 } }).help, true);
    }
  });

  it('refuses unknown flags, missing values and wrong positional counts', () => {
    usageError(() => parseFlags(['--nope'], { usage: USAGE, options: OPTIONS, positionals: { max: 1 } }), /unknown option '--nope'/);
    usageError(() => parseFlags(['--data-dir'], { usage: USAGE, options: OPTIONS }), /--data-dir/);
    usageError(() => parseFlags(['a', 'b'], { usage: USAGE, options: OPTIONS, positionals: { max: 1 } }), /unexpected argument: 'b'/);
    usageError(() => parseFlags([], { usage: USAGE, options: OPTIONS, positionals: { min: 1 } }), /missing argument/);
  });

  it('requireFlag and integerFlag', () => {
    assert.equal(requireFlag('x', '--data-dir', USAGE), 'x');
    usageError(() => requireFlag(undefined, '--data-dir', USAGE), /missing required option --data-dir/);
    assert.equal(integerFlag('12', '--limit', USAGE, { min: 1, max: 20 }), 12);
    assert.equal(integerFlag(undefined, '--limit', USAGE), undefined);
    usageError(() => integerFlag('21', '--limit', USAGE, { min: 1, max: 20 }), /between 1 and 20, got '21'/);
    usageError(() => integerFlag('1.5', '--limit', USAGE), /whole number/);
    usageError(() => integerFlag('ten', '--limit', USAGE, { min: 0 }), /at least 0/);
  });

  it('integerFlag names the upper bound a value passes, so the message never contradicts the value', () => {
    usageError(() => integerFlag('99999999999999999999', '--limit', USAGE, { min: 1 }), /^--limit needs a whole number of at least 1 and at most 9007199254740991, got '99999999999999999999'$/);
    usageError(() => integerFlag('9007199254740992', '--limit', USAGE), /^--limit needs a whole number of at most 9007199254740991/);
    usageError(() => integerFlag('0', '--limit', USAGE, { min: 1 }), /^--limit needs a whole number of at least 1, got '0'$/);
    usageError(() => integerFlag('9'.repeat(60), '--limit', USAGE, { min: 1 }), /got '9{40}… \(60 characters\)'$/);
    assert.equal(integerFlag(' 7 ', '--limit', USAGE, { min: 1 }), 7);
  });

  it('unknownSubcommand takes a dashed word for an option and suggests --help', () => {
    assert.match(unknownSubcommand('--hepl', ['search', 'list'], USAGE).message, /^unknown option '--hepl'; did you mean '--help'\?$/);
    assert.match(unknownSubcommand('-x', ['search', 'list'], USAGE).message, /^unknown option '-x'; give a subcommand first \(search, list\), or --help$/);
    assert.match(unknownSubcommand('lsit', ['search', 'list'], USAGE).message, /^unknown subcommand 'lsit'; did you mean 'list'\?$/);
  });
});

test('suggestions come from one edit distance that counts a swap of two letters as one slip', async () => {
  const { editDistance, closestMatch } = await import('../src/config/edit-distance.js');
  assert.equal(editDistance('modle', 'model'), 1);
  assert.equal(closestMatch('hepl', ['help', 'version']), 'help');
  assert.equal(closestMatch('serch', ['search', 'list', 'forget', 'stats']), 'search');
  assert.equal(closestMatch('frobnicate', ['search', 'list']), undefined);
});

test('a usage error shows the command line(s) of the usage and where the full help is, not the whole help', () => {
  const usage = 'Usage: magpie memory forget ID [--data-dir DIR]\n       magpie memory forget --user USER_ID [--json]\n\nForgets.\n\nOptions:\n  --json  counts\n';
  const rendered = new UsageError('missing ID', usage).render();
  assert.equal(
    rendered,
    "missing ID\n\nUsage: magpie memory forget ID [--data-dir DIR]\n       magpie memory forget --user USER_ID [--json]\nRun 'magpie memory forget --help' for every option.",
  );
});
