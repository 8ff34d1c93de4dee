/**
 * `magpie chat` reports its storage's health as the bot does: a write that failed makes it
 * unhealthy (/readyz says why), and the next write that succeeds makes it healthy again.
 */
import assert from 'node:assert/strict';
import { PassThrough, Readable } from 'node:stream';
import { test } from 'node:test';
import { openApp } from '../src/app/index.js';
import { ConsoleAdapter } from '../src/cli/console-adapter.js';
import { MagpieError } from '../src/common/errors.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { tempDir } from './compaction-support.js';
import { appEnv, withTestStorage } from './support/storage.js';

test('after a failed write, the next message stored makes chat healthy again', async () => {
  const dir = tempDir();
  const events: MagpieEvent[] = [];
  const stream = new EventStream();
  stream.subscribe((event) => events.push(event));
  const config = withTestStorage({ ...DEFAULTS, memory: { ...DEFAULTS.memory, dataDir: dir.path }, metrics: { ...DEFAULTS.metrics, listen: '' } });
  const app = await openApp({ config, env: appEnv(), events: stream });
  try {
    // What a write that timed out leaves (console-adapter reports it so): not ready.
    app.storage.reportFailure(new MagpieError('storage_timeout', 'PostgreSQL did not answer within 6000 ms', { retryable: true }));
    assert.ok(app.storage.problem, 'precondition: unhealthy');
    const output = new PassThrough();
    const notices = new PassThrough();
    const adapter = new ConsoleAdapter({ app, channelName: 'health', userName: 'tester', input: Readable.from(['the network is back\n']), output, notices });
    await adapter.run();
    assert.equal(app.storage.problem, undefined, 'the stored message made it healthy again');
    assert.ok(events.some((event) => event.type === 'storage_recovered'));
    assert.equal((await app.runtime.liveContext('console:health')).entries.length, 1);
  } finally {
    await app.close();
    dir.remove();
  }
});

test('a command that meets a storage failure says the command did not complete, not that a message was lost', async () => {
  const dir = tempDir();
  const config = withTestStorage({ ...DEFAULTS, memory: { ...DEFAULTS.memory, dataDir: dir.path }, metrics: { ...DEFAULTS.metrics, listen: '' } });
  const app = await openApp({ config, env: appEnv(), events: new EventStream() });
  try {
    // The channel's first load met a hung server (what /context runs into then).
    app.runtime.status = () => Promise.reject(new MagpieError('storage_timeout', 'PostgreSQL did not answer within 3000 ms', { retryable: true }));
    const notices = new PassThrough();
    let said = '';
    notices.on('data', (chunk: Buffer) => (said += chunk.toString()));
    const adapter = new ConsoleAdapter({ app, channelName: 'health', userName: 'tester', input: Readable.from(['/context\n']), output: new PassThrough(), notices });
    await adapter.run();
    assert.match(said, /PostgreSQL did not answer within 3000 ms/);
    assert.match(said, /\(\/context did not complete; try it again\)/);
    assert.doesNotMatch(said, /message was not stored/);
  } finally {
    await app.close();
    dir.remove();
  }
});
