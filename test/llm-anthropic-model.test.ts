import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { InputError } from '../src/common/errors.js';
import type { LlmSettings } from '../src/config/types.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { ChatModel, ModelRequest, ModelResponse } from '../src/llm/chat-model.js';
import { createAnthropicModel, limitConcurrency, ModelError } from '../src/llm/index.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';

const SECRET = 'sk-test-very-secret-0123456789';
const ENV = { MAGPIE_TEST_KEY: SECRET };

function settingsFor(fake: FakeAnthropic, overrides: Partial<LlmSettings> = {}): LlmSettings {
  return {
    ...DEFAULTS.llm,
    model: 'claude-test',
    baseUrl: fake.baseUrl,
    apiKeyEnv: 'MAGPIE_TEST_KEY',
    timeoutMs: 2_000,
    maxRetries: 0,
    maxConcurrentCalls: 4,
    ...overrides,
  };
}

const HELLO: ModelRequest = {
  system: 'You are terse.',
  messages: [{ role: 'user', content: 'hello' }],
  maxTokens: 64,
};

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected the call to fail');
}

describe('createAnthropicModel against the fake Messages API', () => {
  let fake: FakeAnthropic;
  before(async () => {
    fake = await startFakeAnthropic();
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.reset();
  });

  it('sends the request and maps a text reply', async () => {
    fake.enqueue({ text: 'hi there', usage: { inputTokens: 12, outputTokens: 3 } });
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    const response = await model.createMessage(HELLO);
    assert.deepEqual(response, {
      content: [{ type: 'text', text: 'hi there' }],
      stopReason: 'end_turn',
      usage: { inputTokens: 12, outputTokens: 3 },
    });
    assert.equal(fake.requests.length, 1);
    const [request] = fake.requests;
    assert.equal(request!.path, '/v1/messages');
    assert.equal(request!.body.model, 'claude-test');
    assert.equal(request!.body.system, 'You are terse.');
    assert.equal(request!.body.max_tokens, 64);
    assert.deepEqual(request!.body.messages, [{ role: 'user', content: 'hello' }]);
    assert.equal(request!.body.stream, undefined);
    assert.match(request!.headers['authorization'] ?? request!.headers['x-api-key'] ?? '', new RegExp(SECRET));
  });

  it('offers tools and maps tool_use blocks', async () => {
    fake.enqueue({ toolUse: [{ name: 'lookup', input: { q: 'x' }, id: 'toolu_1' }], text: 'let me look' });
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    const response = await model.createMessage({
      ...HELLO,
      tools: [{ name: 'lookup', description: 'Looks up', input_schema: { type: 'object', properties: {} } }],
      toolChoice: { type: 'any' },
    });
    assert.equal(response.stopReason, 'tool_use');
    assert.deepEqual(response.content, [
      { type: 'text', text: 'let me look' },
      { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'x' } },
    ]);
    const body = fake.requests[0]!.body;
    assert.deepEqual(
      body.tools.map((tool: { name: string }) => tool.name),
      ['lookup'],
    );
    assert.deepEqual(body.tool_choice, { type: 'any' });
  });

  it('sends tool calls and tool results back in the Messages API shape', async () => {
    fake.enqueue({ text: 'done' });
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    await model.createMessage({
      system: 's',
      maxTokens: 16,
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'lookup', input: { q: 1 } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'nope', is_error: true }] },
      ],
    });
    assert.deepEqual(fake.requests[0]!.body.messages.slice(1), [
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'lookup', input: { q: 1 } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'nope', is_error: true }] },
    ]);
  });

  it('retries a 429 through the SDK and succeeds', async () => {
    fake.enqueue({ status: 429, message: 'slow down' }, { text: 'ok after retry' });
    const model = createAnthropicModel(settingsFor(fake, { maxRetries: 1 }), { env: ENV });
    const response = await model.createMessage(HELLO);
    assert.deepEqual(response.content, [{ type: 'text', text: 'ok after retry' }]);
    assert.equal(fake.requests.length, 2);
  });

  it('turns exhausted 500s into a retryable ModelError with the status', async () => {
    fake.enqueue({ status: 500, message: 'boom' }, { status: 500, message: 'boom again' });
    const model = createAnthropicModel(settingsFor(fake, { maxRetries: 1 }), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError, String(error));
    assert.equal(error.status, 500);
    assert.equal(error.retryable, true);
    assert.equal(error.contextOverflow, false);
    assert.equal(error.reason, 'server_error');
    assert.equal(fake.requests.length, 2);
  });

  it('fails with a retryable timeout when the server is slower than timeoutMs', async () => {
    fake.enqueue({ delayMs: 5_000, then: { text: 'too late' } });
    const model = createAnthropicModel(settingsFor(fake, { timeoutMs: 200 }), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError, String(error));
    assert.equal(error.reason, 'timeout');
    assert.equal(error.retryable, true);
  });

  it('honours a per-call timeout', async () => {
    fake.enqueue({ delayMs: 5_000, then: { text: 'too late' } });
    const model = createAnthropicModel(settingsFor(fake, { timeoutMs: 10_000 }), { env: ENV });
    const error = await rejection(model.createMessage(HELLO, { timeoutMs: 150 }));
    assert.ok(error instanceof ModelError);
    assert.equal(error.reason, 'timeout');
    await abandonedRequestArrived(fake, 1);
  });

  it('flags a context overflow', async () => {
    fake.enqueue({ status: 400, message: 'prompt is too long: 212345 tokens > 200000 maximum' });
    const model = createAnthropicModel(settingsFor(fake, { maxRetries: 1 }), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError);
    assert.equal(error.contextOverflow, true);
    assert.equal(error.retryable, false);
    assert.equal(error.status, 400);
    assert.equal(error.reason, 'context_overflow');
    assert.equal(fake.requests.length, 1, '400 is not retried');
  });

  it('does not flag other 400s as overflow', async () => {
    fake.enqueue({ status: 400, message: 'messages: roles must alternate' });
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError);
    assert.equal(error.contextOverflow, false);
    assert.equal(error.reason, 'bad_request');
  });

  it('stops when the signal aborts, before or during the call', async () => {
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    const early = await rejection(model.createMessage(HELLO, { signal: AbortSignal.abort() }));
    assert.ok(early instanceof ModelError);
    assert.equal(early.reason, 'aborted');
    assert.equal(fake.requests.length, 0);

    fake.enqueue({ delayMs: 5_000, then: { text: 'never seen' } });
    const controller = new AbortController();
    const call = model.createMessage(HELLO, { signal: controller.signal });
    // Abort once the request has arrived: a request still on its way when the next test starts
    // would take that test's scripted reply (seen on a loaded machine).
    while (fake.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    controller.abort();
    const error = await rejection(call);
    assert.ok(error instanceof ModelError);
    assert.equal(error.reason, 'aborted');
    assert.equal(error.retryable, false);
    await abandonedRequestArrived(fake, 1);
  });

  it('reports a dropped connection as retryable', async () => {
    // As the default too: a late request left over from an earlier test cannot take the
    // only hang-up and leave this call the fake's unscripted 500.
    fake.setDefault({ hangUp: true });
    try {
      const model = createAnthropicModel(settingsFor(fake), { env: ENV });
      const error = await rejection(model.createMessage(HELLO));
      assert.ok(error instanceof ModelError);
      assert.equal(error.reason, 'connection');
      assert.equal(error.retryable, true);
    } finally {
      fake.reset();
    }
  });

  it('never puts the API key in an error message', async () => {
    fake.enqueue({ status: 401, message: `invalid x-api-key ${SECRET}` });
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError);
    assert.equal(error.reason, 'authentication');
    assert.ok(!error.message.includes(SECRET), error.message);
    assert.ok(!error.render().includes(SECRET));
    assert.ok(!String((error.cause as Error | undefined)?.message).includes(SECRET));
    assert.ok(!JSON.stringify(error.context).includes(SECRET));
  });

  it('rejects malformed responses', async () => {
    fake.enqueue({ raw: { type: 'message', content: 'not an array' } });
    const model = createAnthropicModel(settingsFor(fake), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError);
    assert.equal(error.reason, 'bad_response');
  });

  it('the fake answers an error when nothing is queued', async () => {
    const model = createAnthropicModel(settingsFor(fake, { maxRetries: 2 }), { env: ENV });
    const error = await rejection(model.createMessage(HELLO));
    assert.ok(error instanceof ModelError);
    assert.match(error.message, /no reply queued/);
    assert.equal(fake.requests.length, 1);
  });
});

describe('createAnthropicModel configuration', () => {
  it('refuses to start without a key when the endpoint needs one', () => {
    const settings: LlmSettings = {
      ...DEFAULTS.llm,
      model: 'claude-test',
      baseUrl: '',
      apiKeyEnv: 'ANTHROPIC_API_KEY',
      timeoutMs: 1_000,
      maxRetries: 0,
      maxConcurrentCalls: 1,
    };
    assert.throws(
      () => createAnthropicModel(settings, { env: {} }),
      (error: unknown) =>
        error instanceof InputError && /ANTHROPIC_API_KEY/.test(error.message) && /base_url/.test(error.render()),
    );
  });

  it('refuses an empty model id', () => {
    assert.throws(
      () =>
        createAnthropicModel(
          { ...DEFAULTS.llm, model: '', baseUrl: '', apiKeyEnv: 'K', timeoutMs: 1, maxRetries: 0, maxConcurrentCalls: 1 },
          { env: { K: 'x' } },
        ),
      InputError,
    );
  });

  it('talks to a custom base URL without a key', async () => {
    const fake = await startFakeAnthropic();
    try {
      fake.enqueue({ text: 'local model here' });
      const model = createAnthropicModel(settingsFor(fake, { apiKeyEnv: 'MAGPIE_UNSET_VARIABLE' }), { env: {} });
      const response = await model.createMessage(HELLO);
      assert.deepEqual(response.content, [{ type: 'text', text: 'local model here' }]);
    } finally {
      await fake.close();
    }
  });
});

describe('limitConcurrency', () => {
  it('never runs more than max calls at the server at once', async () => {
    const fake = await startFakeAnthropic();
    try {
      fake.setDefault({ delayMs: 60, then: { text: 'slow answer' } });
      const model = limitConcurrency(createAnthropicModel(settingsFor(fake), { env: ENV }), 2);
      const answers = await Promise.all(Array.from({ length: 7 }, () => model.createMessage(HELLO)));
      assert.equal(answers.length, 7);
      assert.equal(fake.requests.length, 7);
      assert.equal(fake.maxInFlight, 2);
    } finally {
      await fake.close();
    }
  });

  /** A hand-written model whose calls finish when the test says so. */
  function gatedModel(): { model: ChatModel; started: string[]; finish: () => void } {
    const started: string[] = [];
    const gates: Array<() => void> = [];
    return {
      started,
      finish: () => gates.shift()?.(),
      model: {
        model: 'gated',
        createMessage(request: ModelRequest): Promise<ModelResponse> {
          started.push(String(request.messages[0]?.content));
          return new Promise((resolve) =>
            gates.push(() =>
              resolve({ content: [], stopReason: 'end_turn', usage: { inputTokens: 0, outputTokens: 0 } }),
            ),
          );
        },
      },
    };
  }
  const ask = (content: string): ModelRequest => ({ system: '', maxTokens: 1, messages: [{ role: 'user', content }] });
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  it('serves waiters in arrival order, and an aborted waiter gives up its place', async () => {
    const gated = gatedModel();
    const model = limitConcurrency(gated.model, 1);
    const controller = new AbortController();
    const first = model.createMessage(ask('a'));
    const second = model.createMessage(ask('b'), { signal: controller.signal });
    const third = model.createMessage(ask('c'));
    await tick();
    assert.deepEqual(gated.started, ['a']);
    controller.abort();
    const error = await rejection(second);
    assert.ok(error instanceof ModelError);
    assert.equal(error.reason, 'aborted');
    gated.finish();
    await first;
    await tick();
    assert.deepEqual(gated.started, ['a', 'c']);
    gated.finish();
    await third;
  });
});

/**
 * On a loaded machine a request the client abandoned may reach the fake only after the test
 * ended, and take the reply the next test queued: wait (boundedly) until it has arrived.
 */
async function abandonedRequestArrived(fake: FakeAnthropic, count: number): Promise<void> {
  for (let waited = 0; fake.requests.length < count && waited < 3000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
