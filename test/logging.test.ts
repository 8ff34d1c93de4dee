import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { EventStream } from '../src/common/events.js';
import { LiveConfig } from '../src/config/live-config.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { attachEventLogger, createLogger, followConfigLevel, resolveLogLevel } from '../src/logging/index.js';

/** A destination that keeps what was written, line by line. */
function capture() {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(chunk.toString());
      callback();
    },
  });
  const lines = () => chunks.join('').split('\n').filter((line) => line !== '');
  return { stream, lines, json: () => lines().map((line) => JSON.parse(line) as Record<string, unknown>) };
}

describe('createLogger', () => {
  it('writes JSON lines at the configured level', () => {
    const out = capture();
    const logger = createLogger({ level: 'warn', destination: out.stream, env: {} });
    logger.info('hidden');
    logger.warn({ channel_id: '1' }, 'shown');
    const lines = out.json();
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.msg, 'shown');
    assert.equal(lines[0]?.channel_id, '1');
  });

  it('LOG_LEVEL wins over the config; an invalid one is ignored with a warning', () => {
    assert.equal(resolveLogLevel('info', { LOG_LEVEL: 'debug' }), 'debug');
    assert.equal(resolveLogLevel('error', {}), 'error');
    assert.equal(resolveLogLevel('error', { LOG_LEVEL: 'chatty' }), 'error');
    const out = capture();
    createLogger({ level: 'warn', destination: out.stream, env: { LOG_LEVEL: 'chatty' } });
    assert.match(String(out.json()[0]?.msg), /LOG_LEVEL is not a level/);
  });

  it('redacts secrets wherever they sit', () => {
    const out = capture();
    const logger = createLogger({ destination: out.stream, env: {} });
    logger.info(
      {
        token: 'discord-secret-1',
        llm: { apiKey: 'sk-secret-2', api_key: 'sk-secret-3' },
        request: { headers: { authorization: 'Bearer secret-4', 'x-api-key': 'secret-5' } },
        headers: { authorization: 'Bearer secret-6' },
        channel_id: '42',
      },
      'call',
    );
    const line = out.lines()[0] ?? '';
    assert.doesNotMatch(line, /secret-\d/);
    assert.match(line, /\[redacted\]/);
    assert.match(line, /"channel_id":"42"/);
  });

  it('pretty output is readable text, written in-process', () => {
    const out = capture();
    const logger = createLogger({ destination: out.stream, pretty: true, env: {} });
    logger.info({ channel_id: '7' }, 'hello there');
    const text = out.lines().join('\n');
    assert.match(text, /INFO.*hello there/);
    assert.throws(() => JSON.parse(out.lines()[0] ?? ''));
  });

  it('follows [logging] level on hot reload unless LOG_LEVEL pins it', () => {
    const live = new LiveConfig(DEFAULTS);
    const logger = createLogger({ destination: capture().stream, env: {} });
    const stop = followConfigLevel(live, logger, {});
    live.replace({ ...DEFAULTS, logging: { level: 'debug' } });
    assert.equal(logger.level, 'debug');
    stop();
    const pinned = createLogger({ destination: capture().stream, env: { LOG_LEVEL: 'error' } });
    followConfigLevel(live, pinned, { LOG_LEVEL: 'error' });
    live.replace({ ...DEFAULTS, logging: { level: 'trace' } });
    assert.equal(pinned.level, 'error');
  });
});

describe('attachEventLogger', () => {
  it('logs each event as one line: event, channel_id, numbers; warnings for failures and truncation', () => {
    const out = capture();
    const events = new EventStream();
    const detach = attachEventLogger(events, createLogger({ destination: out.stream, level: 'info', env: {} }));
    events.emit({ type: 'compaction_triggered', channel_id: '9', tier: 'background', usage: 0.81 });
    events.emit({ type: 'compaction_failed', channel_id: '9', error: 'timeout', attempt: 1 });
    events.emit({ type: 'emergency_truncation', channel_id: '9', removed: 40 });
    events.emit({ type: 'summary_saved', channel_id: '9', summary: 'what users said', tokens: 300 });
    detach();
    events.emit({ type: 'after_detach' });
    const lines = out.json();
    assert.deepEqual(
      lines.map((line) => [line.event, line.level]),
      [
        ['compaction_triggered', 'info'],
        ['compaction_failed', 'warn'],
        ['emergency_truncation', 'warn'],
        ['summary_saved', 'info'],
      ],
    );
    assert.equal(lines[0]?.channel_id, '9');
    assert.equal(lines[0]?.usage, 0.81);
    assert.equal(lines[3]?.tokens, 300);
    assert.equal(lines[3]?.summary, undefined, 'content is not logged by default');
  });

  it('never lets a field of the event take the place of its name', () => {
    const out = capture();
    const events = new EventStream();
    attachEventLogger(events, createLogger({ destination: out.stream, level: 'info', env: {} }));
    events.emit({ type: 'discord_event_failed', event: 'catch_up', error: 'connection lost' });
    const [line] = out.json();
    assert.equal(line?.event, 'discord_event_failed');
    assert.equal(line?.event_detail, 'catch_up');
  });

  it('keeps counts whose names could carry content (compaction_started messages: 13), drops the text', () => {
    const out = capture();
    const events = new EventStream();
    attachEventLogger(events, createLogger({ destination: out.stream, level: 'info', env: {} }));
    events.emit({ type: 'compaction_started', channel_id: '9', compaction_id: '9/1', messages: 13, summarizer: 'llm' });
    events.emit({ type: 'turn_debug', channel_id: '9', messages: 'alice: my password is hunter2' });
    const lines = out.json();
    assert.equal(lines[0]?.messages, 13, 'the number of messages compacted is an operator number');
    assert.equal(lines[1]?.messages, undefined, 'message text stays out of the log');
    assert.doesNotMatch(out.lines().join('\n'), /hunter2/);
  });
});
