import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { EXIT, type CliIo } from '../src/cli/command.js';
import { UsageError } from '../src/cli/parse-flags.js';
import { reportError } from '../src/cli/run-cli.js';
import { InputError, MagpieError } from '../src/common/errors.js';
import { ConfigError } from '../src/config/problems.js';
import { PgError } from '../src/storage/postgres/pg-error.js';

function fakeIo(): { io: CliIo; stderr: () => string } {
  let written = '';
  const stderr = new Writable({
    write(chunk, _encoding, callback) {
      written += chunk.toString();
      callback();
    },
  });
  const io: CliIo = { stdout: new PassThrough(), stderr, stdin: new PassThrough(), env: {}, cwd: process.cwd() };
  return { io, stderr: () => written };
}

describe('the CLI error boundary', () => {
  it('UsageError → message and usage, exit 2', () => {
    const { io, stderr } = fakeIo();
    assert.equal(reportError('replay', new UsageError('missing argument', 'Usage: magpie replay FILE\n'), io), EXIT.usage);
    assert.match(stderr(), /^magpie replay: missing argument\n\nUsage: magpie replay FILE\nRun 'magpie replay --help' for every option\.\n$/);
  });

  it('ConfigError → every problem, exit 3', () => {
    const { io, stderr } = fakeIo();
    const error = new ConfigError('c.toml', [
      { path: 'defaults.context_window', message: 'must be at least 1, got 0', line: 3 },
      { path: 'llm.api_key', message: 'secrets must not be written in the config file' },
    ]);
    assert.equal(reportError('start', error, io), EXIT.config);
    assert.match(stderr(), /defaults\.context_window: must be at least 1, got 0 \(line 3\)/);
    assert.match(stderr(), /llm\.api_key: secrets/);
  });

  it('InputError → rendered with its hint, exit 2; MagpieError → exit 1; neither shows a stack', () => {
    const input = fakeIo();
    assert.equal(reportError('memory', new InputError('no such data dir', { hint: 'pass --data-dir' }), input.io), EXIT.usage);
    assert.match(input.stderr(), /no such data dir\n  hint: pass --data-dir/);
    const failure = fakeIo();
    assert.equal(reportError('start', new MagpieError('discord_down', 'gateway refused'), failure.io), EXIT.failure);
    assert.equal(failure.stderr(), 'magpie start: gateway refused\n');
    assert.doesNotMatch(input.stderr() + failure.stderr(), /\n\s+at /);
  });

  it('a PostgreSQL refusal says what happened (and what to do when that is known), without a stack, exit 1', () => {
    const dropped = fakeIo();
    assert.equal(reportError('start', new PgError('terminating connection due to administrator command', '57P01', undefined), dropped.io), EXIT.failure);
    assert.match(dropped.stderr(), /^magpie start: the PostgreSQL database dropped the connection \(57P01: terminating connection/);
    assert.match(dropped.stderr(), /hint: check that the server is up/);
    const refused = fakeIo();
    assert.equal(reportError('status', new PgError('relation "history_entries" does not exist', '42P01', undefined), refused.io), EXIT.failure);
    assert.equal(refused.stderr(), 'magpie status: PostgreSQL error 42P01: relation "history_entries" does not exist\n');
    assert.doesNotMatch(dropped.stderr() + refused.stderr(), /\n\s+at /);
  });

  it('an unexpected error shows its stack (it is a bug), exit 1', () => {
    const { io, stderr } = fakeIo();
    assert.equal(reportError('chat', new TypeError('x is undefined'), io), EXIT.failure);
    assert.match(stderr(), /unexpected error: TypeError: x is undefined\n\s+at /);
  });
});
