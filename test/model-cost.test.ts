import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { checkConfigText, parseConfigText } from '../src/config/index.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { ChatModel, ModelRequest } from '../src/llm/chat-model.js';
import { createAnthropicModel } from '../src/llm/anthropic-model.js';
import { observeModel } from '../src/llm/observed-model.js';
import { billedInputTokens, budgetTokens, cachedShare, usageFields, wholeInputTokens } from '../src/llm/usage.js';
import { MagpieMetrics } from '../src/metrics/index.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { breakpointsOf, FakePromptCache } from './fakes/fake-prompt-cache.js';
import { parseMetrics, sampleValue } from './support/prometheus-text.js';

const USAGE = { inputTokens: 100, outputTokens: 50, cacheWriteTokens: 1_000, cacheWrite1hTokens: 400, cacheReadTokens: 10_000 };

describe('what a call costs', () => {
  it('reads the usage whole and bills each part at its weight', () => {
    assert.equal(wholeInputTokens(USAGE), 11_100);
    // 100 + 1.25 × 600 + 2 × 400 + 0.1 × 10,000
    assert.equal(billedInputTokens(USAGE), 100 + 750 + 800 + 1_000);
    assert.equal(budgetTokens(USAGE, 'tokens'), 11_150);
    assert.equal(budgetTokens(USAGE, 'billed'), 2_700);
    assert.equal(cachedShare(USAGE), 10_000 / 11_100);
    assert.equal(cachedShare({ inputTokens: 0, outputTokens: 0 }), 0);
    assert.deepEqual(usageFields({ inputTokens: 7, outputTokens: 1 }), { input_tokens: 7, cache_write_tokens: 0, cache_read_tokens: 0, billed_input_tokens: 7 });
  });

  it('config: prompt_cache, cache_min_tokens, prices and budget_unit, each refused with its key when wrong', () => {
    const config = parseConfigText('[llm]\nprompt_cache = "1h"\ncache_min_tokens = 2048\nprice_input_per_mtok = 3\nprice_output_per_mtok = 15.5\n[defaults]\nbudget_unit = "billed"\n');
    assert.equal(config.llm.promptCache, '1h');
    assert.equal(config.llm.cacheMinTokens, 2048);
    assert.equal(config.llm.priceInputPerMtok, 3);
    assert.equal(config.llm.priceOutputPerMtok, 15.5);
    assert.equal(config.defaults.budgetUnit, 'billed');
    assert.equal(parseConfigText('').llm.promptCache, '5m');
    assert.equal(parseConfigText('').defaults.budgetUnit, 'tokens');
    const bad: Array<[string, string, RegExp]> = [
      ['[llm]\nprompt_cache = "10m"\n', 'llm.prompt_cache', /one of 5m, 1h, off/],
      ['[llm]\nprompt_cache = true\n', 'llm.prompt_cache', /got a boolean/],
      ['[llm]\ncache_min_tokens = -5\n', 'llm.cache_min_tokens', /at least 0/],
      ['[llm]\nprice_input_per_mtok = -1\n', 'llm.price_input_per_mtok', /at least 0 \(price per million tokens\), got -1/],
      ['[llm]\nprice_output_per_mtok = "3 dollars"\n', 'llm.price_output_per_mtok', /got a string/],
      ['[llm]\nprice_input_per_mtok = nan\n', 'llm.price_input_per_mtok', /got nan$/],
      ['[defaults]\nbudget_unit = "dollars"\n', 'defaults.budget_unit', /one of tokens, billed/],
      ['[channels."123"]\nbudget_unit = 1\n', 'channels.123.budget_unit', /one of tokens, billed/],
    ];
    for (const [text, path, pattern] of bad) {
      const result = checkConfigText(text);
      assert.equal(result.ok, false, text);
      if (result.ok) continue;
      assert.equal(result.problems[0]!.path, path, text);
      assert.match(result.problems[0]!.message, pattern, text);
    }
  });

  it('counts each part of the input in the metrics, and the billed equivalent', async () => {
    const metrics = new MagpieMetrics({ defaultMetrics: false });
    const model: ChatModel = { model: 'm', createMessage: async () => ({ content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn', usage: USAGE }) };
    await observeModel(model, 'channel', metrics.modelObserver).createMessage({ system: '', messages: [], maxTokens: 1 });
    const samples = parseMetrics(await metrics.text());
    assert.equal(sampleValue(samples, 'magpie_model_input_tokens_total', { purpose: 'channel', part: 'uncached' }), 100);
    assert.equal(sampleValue(samples, 'magpie_model_input_tokens_total', { purpose: 'channel', part: 'cache_write' }), 1_000);
    assert.equal(sampleValue(samples, 'magpie_model_input_tokens_total', { purpose: 'channel', part: 'cache_read' }), 10_000);
    assert.equal(sampleValue(samples, 'magpie_model_output_tokens_total', { purpose: 'channel' }), 50);
    assert.equal(sampleValue(samples, 'magpie_model_billed_input_tokens_total', { purpose: 'channel' }), 2_650);
    assert.equal(sampleValue(samples, 'magpie_model_tokens_total', { purpose: 'channel', direction: 'input' }), 11_100, 'the whole input');
    assert.equal(sampleValue(samples, 'magpie_model_input_tokens_total', { purpose: 'compaction', part: 'cache_read' }), 0, 'present before the first call');
  });
});

describe('the prompt_cache setting on the wire', () => {
  let fake: FakeAnthropic;
  const cache = new FakePromptCache({ now: () => 0 });
  before(async () => {
    fake = await startFakeAnthropic({ promptCache: cache });
    fake.setDefault({ text: 'ok' });
  });
  after(() => fake.close());

  const request: ModelRequest = {
    system: 'You are Magpie. '.repeat(700),
    messages: [{ role: 'user', content: 'ana: what did we plant? '.repeat(100) }],
    maxTokens: 64,
  };
  const model = (promptCache: '5m' | '1h' | 'off') =>
    createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-sonnet-4-6', baseUrl: fake.baseUrl, maxRetries: 0, promptCache }, { env: {} });

  it('"off" sends no breakpoint, "5m" and "1h" send them with their lifetime, and the usage comes back split', async () => {
    await model('off').createMessage(request);
    assert.deepEqual(breakpointsOf(fake.requests.at(-1)!.body), []);
    assert.equal(typeof fake.requests.at(-1)!.body.system, 'string');
    const first = await model('5m').createMessage(request);
    assert.deepEqual(breakpointsOf(fake.requests.at(-1)!.body), ['system:0', 'message:0:0']);
    assert.ok(!JSON.stringify(fake.requests.at(-1)!.body).includes('"ttl"'), 'the default lifetime is not spelled out');
    assert.ok((first.usage.cacheWriteTokens ?? 0) > 0);
    const second = await model('5m').createMessage(request, { onText: () => {} });
    assert.equal(second.usage.cacheReadTokens, wholeInputTokens(first.usage), 'a streamed answer carries the split too');
    assert.equal(second.usage.inputTokens, 0);
    await model('1h').createMessage(request);
    assert.ok(JSON.stringify(fake.requests.at(-1)!.body).includes('"cache_control":{"type":"ephemeral","ttl":"1h"}'));
  });

  it('a server that sends no cache fields leaves the usage as it was', async () => {
    const plain = await startFakeAnthropic();
    try {
      plain.setDefault({ text: 'ok', usage: { inputTokens: 321, outputTokens: 4 } });
      const response = await createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-test', baseUrl: plain.baseUrl, maxRetries: 0 }, { env: {} }).createMessage(request);
      assert.deepEqual(response.usage, { inputTokens: 321, outputTokens: 4 });
    } finally {
      await plain.close();
    }
  });
});
