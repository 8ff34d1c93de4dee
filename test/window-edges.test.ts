/**
 * The window's edges one piece at a time: both refusal forms as the fake words them and as the
 * bot reads them, images counted by their pixels, `max_tokens` sized to the window, the message
 * being answered never truncated, and config check naming a summary budget that cannot fit.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { observe, overflowNumbers, UNCALIBRATED } from '../src/context/calibration.js';
import type { HistoryEntry } from '../src/context/types.js';
import { truncationCount } from '../src/compaction/emergency.js';
import { checkConfigText } from '../src/config/load-config.js';
import { createAnthropicModel } from '../src/llm/anthropic-model.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { fitAnswer, ModelError, runToolLoop, type AnswerRoom } from '../src/llm/index.js';
import { characterTokenCounter, imageTokens, startFakeAnthropic } from './fakes/fake-anthropic.js';

async function post(baseUrl: string, body: unknown): Promise<{ status: number; body: { error: { type: string; message: string } } }> {
  const response = await fetch(`${baseUrl}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as { error: { type: string; message: string } } };
}

test('the fake refuses in both of the real API forms, and the bot reads the numbers of each', async () => {
  const fake = await startFakeAnthropic({ countTokens: characterTokenCounter({ perMessage: 0 }), contextWindow: 100 });
  try {
    fake.setDefault({ text: 'ok' });
    const long = await post(fake.baseUrl, { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x'.repeat(800) }] });
    assert.equal(long.status, 400);
    assert.equal(long.body.error.type, 'invalid_request_error');
    assert.equal(long.body.error.message, 'prompt is too long: 200 tokens > 100 maximum');
    const sum = await post(fake.baseUrl, { model: 'm', max_tokens: 64, messages: [{ role: 'user', content: 'x'.repeat(200) }] });
    assert.equal(sum.status, 400);
    assert.equal(sum.body.error.message, 'input length and `max_tokens` exceed context limit: 50 + 64 > 100, decrease input length or `max_tokens` and try again');
    const fits = await post(fake.baseUrl, { model: 'm', max_tokens: 50, messages: [{ role: 'user', content: 'x'.repeat(200) }] });
    assert.equal(fits.status, 200);
    assert.deepEqual(fake.requests.map((request) => request.refusal), ['prompt_too_long', 'exceeds_context', undefined]);

    assert.deepEqual(overflowNumbers(long.body.error.message), { tokens: 200, maximum: 100 });
    assert.deepEqual(overflowNumbers(sum.body.error.message), { tokens: 50, answerTokens: 64, maximum: 100 });
    assert.deepEqual(overflowNumbers('input length and `max_tokens` exceed context limit: 178,959 + 64,000 > 200,000'), { tokens: 178959, answerTokens: 64000, maximum: 200000 });
    assert.deepEqual(overflowNumbers('input length and `max_tokens` exceed context limit: 0 + 0 > 0'), {});
    assert.deepEqual(overflowNumbers('request_too_large'), {});
  } finally {
    await fake.close();
  }
});

test('through the SDK, each refusal is a context overflow carrying its numbers; a 413 is one without numbers', async () => {
  const fake = await startFakeAnthropic({ countTokens: characterTokenCounter({ perMessage: 0 }), contextWindow: 100 });
  const model = createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-test', baseUrl: fake.baseUrl, maxRetries: 0, timeoutMs: 5_000 }, { env: {} });
  try {
    const failure = async (maxTokens: number, text: string): Promise<ModelError> => {
      try {
        await model.createMessage({ system: '', messages: [{ role: 'user', content: text }], maxTokens });
      } catch (error) {
        assert.ok(error instanceof ModelError);
        return error;
      }
      throw new Error('not refused');
    };
    const sum = await failure(64, 'x'.repeat(200));
    assert.equal(sum.contextOverflow, true);
    assert.deepEqual(sum.overflow, { tokens: fake.requests[0]!.inputTokens, answerTokens: 64, maximum: 100 });
    const long = await failure(8, 'x'.repeat(800));
    assert.deepEqual(long.overflow, { tokens: fake.requests[1]!.inputTokens, maximum: 100 });
    fake.enqueue({ status: 413, message: 'request too large' });
    const large = await failure(8, 'x');
    assert.equal(large.contextOverflow, true);
    assert.deepEqual(large.overflow, {});
  } finally {
    await fake.close();
  }
});

test('images cost what the API charges for their pixels, resized as it resizes them', () => {
  const png = (width: number, height: number) => {
    const bytes = Buffer.alloc(32);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(bytes, 0);
    bytes.writeUInt32BE(width, 16);
    bytes.writeUInt32BE(height, 20);
    return { type: 'image', source: { type: 'base64', media_type: 'image/png', data: bytes.toString('base64') } };
  };
  assert.equal(imageTokens({ messages: [{ role: 'user', content: [png(750, 100)] }] }), 100);
  assert.equal(imageTokens({ messages: [{ role: 'user', content: [png(200, 200), png(200, 200)] }] }), 2 * Math.ceil(40_000 / 750));
  // A 4000×3000 photo is scaled to about 1.15 megapixels first: about 1,530 tokens, not 16,000.
  const photo = imageTokens({ messages: [{ role: 'user', content: [png(4000, 3000)] }] });
  assert.ok(photo > 1400 && photo <= 1600, String(photo));
  // The base64 length never counts: a huge image is counted by its pixels.
  const counter = characterTokenCounter();
  const withTools = counter({ body: { messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 't', description: 'd', input_schema: {} }] } } as never);
  const without = counter({ body: { messages: [{ role: 'user', content: 'hi' }] } } as never);
  assert.ok(withTools - without >= 346, 'offering tools adds the API tool-use prompt');
});

test('max_tokens is lowered to what the window leaves, never below the floor; below it nothing is sent', () => {
  const room = (input: number): AnswerRoom => ({ contextWindow: 1000, minTokens: 100, inputTokens: () => input });
  const request = { system: '', messages: [], maxTokens: 300 };
  assert.equal(fitAnswer(room(600), request, 0), 300);
  assert.equal(fitAnswer(room(800), request, 0), 200);
  assert.equal(fitAnswer(room(900), request, 0), 100);
  assert.throws(() => fitAnswer(room(901), request, 0), (error) => error instanceof ModelError && error.contextOverflow && /not sent/.test(error.message));
  // A floor above what the caller asks for acts as that.
  assert.equal(fitAnswer({ ...room(950), minTokens: 500 }, { ...request, maxTokens: 40 }, 0), 40);
});

test('an "input + max_tokens" refusal is answered once with what the server says is left', async () => {
  const fake = await startFakeAnthropic({ countTokens: characterTokenCounter({ perMessage: 0 }), contextWindow: 1000 });
  const model = createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-test', baseUrl: fake.baseUrl, maxRetries: 0, timeoutMs: 5_000 }, { env: {} });
  try {
    fake.setDefault({ text: 'answered' });
    const learnt: number[] = [];
    // The estimate says 500; the server counts 800.
    const result = await runToolLoop({
      model,
      system: '',
      messages: [{ role: 'user', content: 'x'.repeat(3200) }],
      tools: [],
      context: { channelId: 'c' },
      maxSteps: 1,
      maxTokens: 400,
      room: { contextWindow: 1000, minTokens: 100, inputTokens: () => 500, onRefusal: (error) => learnt.push(error.overflow!.tokens!) },
    });
    assert.equal(result.text, 'answered');
    const counted = fake.requests[0]!.inputTokens!;
    assert.ok(counted > 500);
    assert.deepEqual(fake.requests.map((request) => [request.body.max_tokens, request.refusal]), [[400, 'exceeds_context'], [1000 - counted, undefined]]);
    assert.deepEqual(learnt, [counted], 'the real count is learnt from the refusal');
  } finally {
    await fake.close();
  }
});

test('one odd request moves a calibrated factor a little, not to its own ratio', () => {
  const settled = observe(UNCALIBRATED, 1000, 1500)!;
  const odd = observe(settled, 1000, 4570)!;
  assert.ok(odd.factor <= 1.5 * 1.15 + 1e-9, `factor ${odd.factor}`);
});

function entry(seq: number, turnId: number, tokens = 10): HistoryEntry {
  return { seq, channelId: 'c', messageId: `m${seq}`, kind: 'message', role: 'user', authorId: 'u', authorName: 'Ann', content: `text ${seq}`, createdAt: seq, tokens, turnId };
}

test('emergency truncation never drops the message being answered, even when nothing before it frees enough', () => {
  const entries = [entry(1, 1), entry(2, 2), entry(3, 3, 5000)];
  // Dropping all three would be the only way under the ceiling; the third is being answered.
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 5, mustFree: 4000, protectFrom: 2 }), 2);
  // Only the turn being answered is live: nothing is dropped.
  assert.equal(truncationCount([entry(3, 3, 5000)], 0.5, { markerTokens: () => 5, mustFree: 4000, protectFrom: 0 }), 0);
  // Without a turn running, emergency still frees what it must.
  assert.equal(truncationCount(entries, 0.5, { markerTokens: () => 5, mustFree: 4000 }), 3);
});

test('config check names a summary budget that cannot fit the window at the compaction tiers', () => {
  const result = checkConfigText('[defaults]\ncontext_window = 3000\nmax_response_tokens = 200\n[defaults.compaction]\nsummary_max_tokens = 2048\n');
  assert.equal(result.ok, false);
  const problem = result.problems.find((candidate) => candidate.path === 'defaults.compaction.summary_max_tokens');
  assert.ok(problem, JSON.stringify(result.problems));
  assert.match(problem.message, /2048 cannot fit context_window \(3000\).*lower summary_max_tokens to at most \d+/);
  assert.equal(checkConfigText('[defaults]\ncontext_window = 3000\nmax_response_tokens = 200\n[defaults.compaction]\nsummary_max_tokens = 300\n').ok, true);
  const floor = checkConfigText('[channels."1"]\ncontext_window = 2500\n[channels."1".compaction]\nsummary_min_tokens = 1500\n');
  assert.equal(floor.ok, false);
  assert.ok(floor.problems.some((candidate) => candidate.path === 'channels.1.compaction.summary_min_tokens'));
  for (const bad of ['0', '-5', '"many"']) {
    const refused = checkConfigText(`[defaults]\nmin_response_tokens = ${bad}\n`);
    assert.equal(refused.ok, false, bad);
    assert.ok(refused.problems.some((candidate) => candidate.path === 'defaults.min_response_tokens'));
  }
});
