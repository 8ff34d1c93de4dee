import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../src/logging/index.js';

function capture() {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      chunks.push(chunk.toString());
      callback();
    },
  });
  return { stream, text: () => chunks.join('') };
}

const ENV = {
  DISCORD_TOKEN: 'discord-secret-value-123',
  ANTHROPIC_API_KEY: 'sk-ant-secret-value-456',
  MY_OTHER_TOKEN: 'custom-secret-value-789',
  NAMED_BY_CONFIG: 'config-named-secret-000',
};

function logEverywhere(logger: ReturnType<typeof createLogger>): void {
  const error = new Error(`request failed: x-api-key ${ENV.ANTHROPIC_API_KEY} refused`, {
    cause: new Error(`gateway said token ${ENV.DISCORD_TOKEN} is invalid`),
  });
  logger.error({ err: error }, 'model call failed');
  logger.info({ deep: { deeper: { token: ENV.DISCORD_TOKEN } } }, 'nested three levels');
  logger.info({ headers: [['authorization', `Bearer ${ENV.ANTHROPIC_API_KEY}`]] }, 'header list');
  logger.info(`a message quoting ${ENV.MY_OTHER_TOKEN} and ${ENV.NAMED_BY_CONFIG}`);
}

describe('secret values from the environment never reach the log', () => {
  it('in error messages, causes, deep objects and header lists (JSON lines)', () => {
    const out = capture();
    logEverywhere(createLogger({ destination: out.stream, env: ENV, secretEnv: ['NAMED_BY_CONFIG'] }));
    const text = out.text();
    for (const secret of Object.values(ENV)) assert.ok(!text.includes(secret), `${secret} leaked:\n${text}`);
    assert.match(text, /\[redacted\]/);
    assert.match(text, /model call failed/);
    assert.equal(text.trim().split('\n').length, 4);
    for (const line of text.trim().split('\n')) JSON.parse(line);
  });

  it('in pretty output too', () => {
    const out = capture();
    logEverywhere(createLogger({ destination: out.stream, env: ENV, pretty: true, secretEnv: ['NAMED_BY_CONFIG'] }));
    const text = out.text();
    for (const secret of Object.values(ENV)) assert.ok(!text.includes(secret), `${secret} leaked:\n${text}`);
    assert.match(text, /model call failed/);
  });

  it('short or empty values are not scrubbed (they would eat ordinary words)', () => {
    const out = capture();
    createLogger({ destination: out.stream, env: { DISCORD_TOKEN: 'a', ANTHROPIC_API_KEY: '' } }).info('a plain line');
    assert.match(out.text(), /a plain line/);
  });
});

describe('LOG_LEVEL and hot reload', () => {
  it('an invalid LOG_LEVEL, ignored at start, does not pin the level against [logging] changes', async () => {
    const { LiveConfig } = await import('../src/config/live-config.js');
    const { DEFAULTS } = await import('../src/config/defaults.js');
    const { followConfigLevel } = await import('../src/logging/index.js');
    const env = { LOG_LEVEL: 'chatty' };
    const live = new LiveConfig(DEFAULTS);
    const logger = createLogger({ destination: capture().stream, env, level: 'info' });
    assert.equal(logger.level, 'info');
    const stop = followConfigLevel(live, logger, env);
    live.replace({ ...DEFAULTS, logging: { level: 'debug' } });
    assert.equal(logger.level, 'debug');
    stop();
    // A valid one (any case) still pins.
    const pinnedEnv = { LOG_LEVEL: 'WARN' };
    const pinned = createLogger({ destination: capture().stream, env: pinnedEnv });
    followConfigLevel(live, pinned, pinnedEnv);
    live.replace({ ...DEFAULTS, logging: { level: 'trace' } });
    assert.equal(pinned.level, 'warn');
  });
});
