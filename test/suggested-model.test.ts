import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { MODEL_HINT } from '../src/app/open-app.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { createAnthropicModel, SUGGESTED_MODEL } from '../src/llm/anthropic-model.js';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { projectRoot } from './support/magpie-process.js';

/** Sends one request for `model` through the real SDK and returns what it printed with console.warn. */
async function sdkWarningsFor(model: string, baseUrl: string): Promise<string[]> {
  const warnings: string[] = [];
  const original = console.warn;
  console.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(' '));
  try {
    const chat = createAnthropicModel({ ...DEFAULTS.llm, model, baseUrl, maxRetries: 0, timeoutMs: 5_000 }, { env: {} });
    await chat.createMessage({ system: 's', messages: [{ role: 'user', content: 'hi' }], maxTokens: 10 });
  } finally {
    console.warn = original;
  }
  return warnings;
}

test('the model the README, config.toml and hints suggest is one the SDK does not call deprecated', async () => {
  const fake = await startFakeAnthropic();
  try {
    fake.setDefault({ text: 'hello' });
    assert.deepEqual(await sdkWarningsFor(SUGGESTED_MODEL, fake.baseUrl), []);
    // The check can fail: a deprecated id does draw the SDK's warning.
    const old = await sdkWarningsFor('claude-sonnet-4-5', fake.baseUrl);
    assert.match(old.join('\n'), /deprecated/);
  } finally {
    await fake.close();
  }
  const root = projectRoot();
  for (const file of ['README.md', 'config.toml']) {
    const text = readFileSync(path.join(root, file), 'utf8');
    assert.ok(text.includes(`"${SUGGESTED_MODEL}"`), `${file} suggests ${SUGGESTED_MODEL}`);
    const named = new Set(text.match(/claude-[a-z0-9-]+/g) ?? []);
    for (const model of named) assert.equal(model, SUGGESTED_MODEL, `${file} names only the suggested model`);
  }
  assert.ok(MODEL_HINT.includes(SUGGESTED_MODEL));
});
