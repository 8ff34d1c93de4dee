import assert from 'node:assert/strict';
import { PassThrough, Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { EXIT, type CliIo } from '../src/cli/command.js';
import { reportError } from '../src/cli/run-cli.js';
import { MagpieError } from '../src/common/errors.js';

const ENV = { DISCORD_TOKEN: 'discord-secret-value-123', ANTHROPIC_API_KEY: 'sk-ant-secret-value-456' };

function fakeIo(): { io: CliIo; stderr: () => string } {
  let written = '';
  const stderr = new Writable({
    write(chunk, _encoding, callback) {
      written += chunk.toString();
      callback();
    },
  });
  const io: CliIo = { stdout: new PassThrough(), stderr, stdin: new PassThrough(), env: ENV, cwd: process.cwd() };
  return { io, stderr: () => written };
}

describe('the CLI error boundary never prints secret values from the environment', () => {
  it('in an unexpected error, its stack, and a MagpieError', () => {
    const unexpected = fakeIo();
    assert.equal(reportError('start', new TypeError(`bad header Bearer ${ENV.ANTHROPIC_API_KEY}`), unexpected.io), EXIT.failure);
    const known = fakeIo();
    assert.equal(reportError('start', new MagpieError('discord_down', `login with ${ENV.DISCORD_TOKEN} refused`), known.io), EXIT.failure);
    const text = unexpected.stderr() + known.stderr();
    for (const secret of Object.values(ENV)) assert.ok(!text.includes(secret), `${secret} leaked:\n${text}`);
    assert.match(unexpected.stderr(), /unexpected error: TypeError: bad header Bearer \[redacted\]/);
    assert.equal(known.stderr(), 'magpie start: login with [redacted] refused\n');
  });
});
