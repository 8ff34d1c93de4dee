import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { MessageCreateParamsNonStreaming, MessageParam } from '@anthropic-ai/sdk/resources/messages';
import { placeCacheBreakpoints, type CachePlacement } from '../src/llm/cache-breakpoints.js';
import { buildSystemPrompt, systemBreaksOf } from '../src/channel/model-request.js';
import type { SummaryEntry } from '../src/context/types.js';
import { cacheMinTokensFor } from '../src/config/defaults.js';
import { breakpointsOf, FakePromptCache, systemText } from './fakes/fake-prompt-cache.js';

const MODEL = 'claude-sonnet-4-5';
const TOOLS = [
  { name: 'memory_search', description: 'Searches what was said. '.repeat(60), input_schema: { type: 'object' as const } },
  { name: 'memory_save', description: 'Saves a lasting fact. '.repeat(60), input_schema: { type: 'object' as const } },
];
const PROMPT = 'You are Magpie, a helpful member of this channel. '.repeat(40);
const PLACEMENT: CachePlacement = { lifetime: '5m', minTokens: 1024 };

function summary(from: number, to: number, words: string): SummaryEntry {
  return { kind: 'summary', fromSeq: from, toSeq: to, content: words.repeat(40), tokens: 0 } as unknown as SummaryEntry;
}

function said(index: number): string {
  return `user${index % 3}: message ${index} about the garden plans and what to plant next spring`;
}

function params(system: string, messages: MessageParam[], tools = TOOLS): MessageCreateParamsNonStreaming {
  return structuredClone({ model: MODEL, max_tokens: 512, system, tools, messages });
}

/** A channel request: `count` user messages, each answered turn by the bot every `every` messages. */
function conversation(count: number, every: number): MessageParam[] {
  const messages: MessageParam[] = [];
  for (let index = 0; index < count; index += 1) {
    const last = messages.at(-1);
    if (last?.role === 'user' && Array.isArray(last.content)) last.content.push({ type: 'text', text: said(index) });
    else messages.push({ role: 'user', content: [{ type: 'text', text: said(index) }] });
    if ((index + 1) % every === 0 && index + 1 < count) messages.push({ role: 'assistant', content: [{ type: 'text', text: `reply ${index}` }] });
  }
  return messages;
}

describe('prompt-cache breakpoints', () => {
  it('marks tools and system, the summaries, the previous turn and the newest turn, and keeps the system text', () => {
    const summaries = [summary(1, 10, 'They chose tomatoes. '), summary(11, 20, 'The budget is 40 euros. ')];
    const system = buildSystemPrompt(PROMPT, summaries);
    const request = params(system, conversation(12, 5));
    const placed = placeCacheBreakpoints(request, { ...PLACEMENT, systemBreaks: systemBreaksOf(PROMPT, summaries) });
    assert.deepEqual(placed, ['tools_and_system', 'summaries', 'previous_turn', 'turn']);
    assert.equal(systemText(request), system, 'the blocks join to exactly the prompt');
    assert.equal((request.system as unknown[]).length, 3, 'the prompt, then one block per summary');
    assert.deepEqual(breakpointsOf(request), ['system:0', 'system:2', 'message:2:4', 'message:4:1']);
  });

  it('places nothing below the minimum, and leaves a short request exactly as it was', () => {
    const request = params('Be brief.', [{ role: 'user', content: 'hi' }], []);
    const before = structuredClone(request);
    assert.deepEqual(placeCacheBreakpoints(request, PLACEMENT), []);
    assert.deepEqual(request, before);
    assert.equal(cacheMinTokensFor('claude-opus-4-6', 0), 4096);
    assert.equal(cacheMinTokensFor('claude-haiku-4-5-20251001', 0), 4096);
    assert.equal(cacheMinTokensFor('claude-sonnet-4-6', 0), 2048);
    assert.equal(cacheMinTokensFor('claude-sonnet-4-5', 0), 1024);
    assert.equal(cacheMinTokensFor('local-llama', 0), 1024);
    assert.equal(cacheMinTokensFor('claude-opus-4-6', 300), 300, 'the configured minimum wins');
  });

  it('asks for the one-hour lifetime when configured', () => {
    const request = params(PROMPT, conversation(40, 5));
    placeCacheBreakpoints(request, { ...PLACEMENT, lifetime: '1h' });
    const marked = JSON.stringify(request).match(/"cache_control":\{[^}]*\}/g) ?? [];
    assert.ok(marked.length > 0);
    for (const mark of marked) assert.equal(mark, '"cache_control":{"type":"ephemeral","ttl":"1h"}');
  });

  it('keeps a 30-step tool loop reading the cache at every step', () => {
    const cache = new FakePromptCache({ now: () => 0 });
    const messages = conversation(30, 6);
    let previousWhole = 0;
    for (let step = 0; step < 30; step += 1) {
      const request = params(PROMPT, messages);
      placeCacheBreakpoints(request, PLACEMENT);
      assert.ok(breakpointsOf(request).length <= 4);
      const usage = cache.account(request);
      const whole = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
      if (step > 0) assert.equal(usage.cache_read_input_tokens, previousWhole, `step ${step} reads the whole previous request`);
      previousWhole = whole;
      messages.push({ role: 'assistant', content: [{ type: 'tool_use', id: `t${step}`, name: 'memory_search', input: { query: `q${step}` } }] });
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `t${step}`, content: `result ${step} `.repeat(10) }] });
    }
  });

  it('reads the previous turn in a busy channel, however many messages came in between', () => {
    const cache = new FakePromptCache({ now: () => 0 });
    const first = params(PROMPT, conversation(30, 10));
    placeCacheBreakpoints(first, PLACEMENT);
    const firstUsage = cache.account(first);
    const firstWhole = firstUsage.input_tokens + firstUsage.cache_creation_input_tokens;
    // The bot answered, then 45 messages arrived: far more than the 20-block lookback.
    const messages = conversation(30, 10);
    messages.push({ role: 'assistant', content: [{ type: 'text', text: 'the answer' }] });
    messages.push({ role: 'user', content: Array.from({ length: 45 }, (_, index) => ({ type: 'text' as const, text: said(100 + index) })) });
    const next = params(PROMPT, messages);
    assert.deepEqual(placeCacheBreakpoints(next, PLACEMENT), ['tools_and_system', 'previous_turn', 'turn']);
    assert.equal(cache.account(next).cache_read_input_tokens, firstWhole);
  });

  it('reads the earlier summaries after a new one is appended', () => {
    const cache = new FakePromptCache({ now: () => 0 });
    const older = [summary(1, 10, 'They chose tomatoes. '), summary(11, 20, 'The budget is 40 euros. ')];
    const newer = [...older, summary(21, 30, 'Ana waters on Mondays. ')];
    const request = (summaries: SummaryEntry[], from: number) => {
      const built = params(buildSystemPrompt(PROMPT, summaries), conversation(10, 4).map((message, index) => (index === 0 ? { ...message, content: [{ type: 'text' as const, text: said(from) }] } : message)));
      placeCacheBreakpoints(built, { ...PLACEMENT, systemBreaks: systemBreaksOf(PROMPT, summaries) });
      return built;
    };
    cache.account(request(older, 0));
    const after = cache.account(request(newer, 50));
    // Everything up to the end of the second summary is read (the fake counts 4 characters a
    // token over the prefix); the third summary and the messages are written.
    const prefixCharacters = TOOLS.reduce((sum, tool) => sum + JSON.stringify(tool).length, 0) + buildSystemPrompt(PROMPT, older).length;
    assert.equal(after.cache_read_input_tokens, Math.ceil(prefixCharacters / 4));
    assert.ok(after.cache_creation_input_tokens > 0);
  });

  it('leaves the request alone when the system has no text and there are no messages to mark', () => {
    const request = params('', [], []);
    assert.deepEqual(placeCacheBreakpoints(request, { ...PLACEMENT, minTokens: 0 }), []);
    assert.equal(request.system, '');
  });

  it('ignores break offsets that are out of range or out of order', () => {
    const request = params(PROMPT, conversation(3, 5));
    placeCacheBreakpoints(request, { ...PLACEMENT, systemBreaks: [PROMPT.length + 50, -1, 0.5, 10, 5] });
    assert.equal(systemText(request), PROMPT);
    assert.deepEqual((request.system as Array<{ text: string }>).map((block) => block.text.length), [10, PROMPT.length - 10]);
  });
});
