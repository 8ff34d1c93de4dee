import assert from 'node:assert/strict';
import { systemText } from './fakes/fake-prompt-cache.js';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { LlmSettings } from '../src/config/types.js';
import { ANSWER_NOW, createAnthropicModel, DROPPED_RESULT, ModelError, runToolLoop, type ChatModel } from '../src/llm/index.js';
import type { ModelMessage } from '../src/llm/chat-model.js';
import { estimateMessageTokens, estimateToolBlockTokens } from '../src/context/token-estimate.js';
import type { ToolContext, ToolHandler } from '../src/llm/tool.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { DEFAULTS } from '../src/config/defaults.js';

const ENV = { MAGPIE_TEST_KEY: 'sk-loop-test' };
const CONTEXT: ToolContext = { channelId: 'c1', guildId: 'g1', sourceMessageIds: ['m1', 'm2'] };

/** A tiny notebook tool: remembers what it was given, answers with a running id. */
function notebookTool(): ToolHandler & { calls: Array<{ input: unknown; context: ToolContext }> } {
  const calls: Array<{ input: unknown; context: ToolContext }> = [];
  return {
    calls,
    definition: {
      name: 'note',
      description: 'Writes a note.',
      input_schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    },
    run(input, context) {
      calls.push({ input, context });
      return { content: JSON.stringify({ id: `n${calls.length}`, status: 'saved' }), isError: false };
    },
  };
}

const throwingTool: ToolHandler = {
  definition: { name: 'explode', description: 'Always throws.', input_schema: { type: 'object' } },
  run() {
    throw new Error('kaboom');
  },
};

describe('runToolLoop with the real SDK against the fake', () => {
  let fake: FakeAnthropic;
  let model: ChatModel;
  before(async () => {
    fake = await startFakeAnthropic();
    const settings: LlmSettings = {
      ...DEFAULTS.llm,
      model: 'claude-test',
      baseUrl: fake.baseUrl,
      apiKeyEnv: 'MAGPIE_TEST_KEY',
      timeoutMs: 2_000,
      maxRetries: 0,
      maxConcurrentCalls: 4,
    };
    model = createAnthropicModel(settings, { env: ENV });
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => {
    fake.reset();
  });

  it('returns a plain text answer in one step', async () => {
    fake.enqueue({ text: 'just text', usage: { inputTokens: 10, outputTokens: 2 } });
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'hi' }],
      tools: [],
      context: CONTEXT,
      maxSteps: 3,
      maxTokens: 100,
    });
    assert.equal(result.text, 'just text');
    assert.equal(result.steps, 1);
    assert.equal(result.stopReason, 'end_turn');
    assert.deepEqual(result.usage, { inputTokens: 10, outputTokens: 2 });
    assert.deepEqual(result.newMessages, [{ role: 'assistant', content: [{ type: 'text', text: 'just text' }] }]);
    assert.equal(fake.requests[0]!.body.tools, undefined);
  });

  it('runs two tool calls, feeds the results back, then returns the final text', async () => {
    const note = notebookTool();
    fake.enqueue(
      {
        text: 'Saving.',
        toolUse: [
          { name: 'note', input: { text: 'Ana likes tea' }, id: 'tu_1' },
          { name: 'note', input: { text: 'meeting on 2026-12-01' }, id: 'tu_2' },
        ],
        usage: { inputTokens: 20, outputTokens: 5 },
      },
      { text: 'All noted.', usage: { inputTokens: 30, outputTokens: 4 } },
    );
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'remember things' }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 4,
      maxTokens: 100,
    });
    assert.equal(result.text, 'All noted.');
    assert.equal(result.steps, 2);
    assert.equal(result.stopReason, 'end_turn');
    assert.deepEqual(result.usage, { inputTokens: 50, outputTokens: 9 });
    assert.deepEqual(
      note.calls.map((call) => call.input),
      [{ text: 'Ana likes tea' }, { text: 'meeting on 2026-12-01' }],
    );
    assert.equal(note.calls[0]!.context.channelId, 'c1');
    assert.deepEqual(note.calls[0]!.context.sourceMessageIds, ['m1', 'm2']);

    assert.equal(result.newMessages.length, 3);
    assert.deepEqual(result.newMessages[1], {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'tu_1', content: '{"id":"n1","status":"saved"}' },
        { type: 'tool_result', tool_use_id: 'tu_2', content: '{"id":"n2","status":"saved"}' },
      ],
    });
    // The second request carries the assistant's tool calls and their results.
    const second = fake.requests[1]!.body;
    assert.deepEqual(second.tools.map((tool: { name: string }) => tool.name), ['note']);
    assert.equal(second.messages.length, 3);
    assert.equal(second.messages[1].role, 'assistant');
    assert.deepEqual(
      second.messages[1].content.map((block: { type: string }) => block.type),
      ['text', 'tool_use', 'tool_use'],
    );
    assert.deepEqual(
      second.messages[2].content.map((block: { tool_use_id: string }) => block.tool_use_id),
      ['tu_1', 'tu_2'],
    );
  });

  it('answers unknown tools, throwing handlers and bad input with errors and carries on', async () => {
    const note = notebookTool();
    fake.enqueue(
      {
        toolUse: [
          { name: 'teleport', input: {}, id: 'tu_a' },
          { name: 'explode', input: {}, id: 'tu_b' },
          { name: 'note', input: 'not json at all', id: 'tu_c' },
          { name: 'note', input: [1, 2], id: 'tu_d' },
          { name: 'note', input: '{"text":"from a JSON string"}', id: 'tu_e' },
        ],
      },
      { text: 'recovered' },
    );
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'go' }],
      tools: [note, throwingTool],
      context: CONTEXT,
      maxSteps: 3,
      maxTokens: 100,
    });
    assert.equal(result.text, 'recovered');
    const results = result.newMessages[1]!.content as Array<{ tool_use_id: string; content: string; is_error?: boolean }>;
    assert.equal(results.length, 5);
    assert.equal(results[0]!.is_error, true);
    assert.match(results[0]!.content, /unknown tool teleport/);
    assert.equal(results[1]!.is_error, true);
    assert.match(results[1]!.content, /kaboom/);
    assert.equal(results[2]!.is_error, true);
    assert.match(results[2]!.content, /not valid JSON/);
    assert.equal(results[3]!.is_error, true);
    assert.match(results[3]!.content, /JSON object/);
    assert.equal(results[4]!.is_error, undefined);
    assert.deepEqual(note.calls.map((call) => call.input), [{ text: 'from a JSON string' }]);
    // What went back to the server has object inputs only (the API refuses anything else).
    for (const block of fake.requests[1]!.body.messages[1].content) {
      if (block.type === 'tool_use') assert.equal(typeof block.input, 'object');
    }
  });

  it('stops after maxSteps model calls with stopReason max_steps', async () => {
    const note = notebookTool();
    fake.enqueue(
      { text: 'one', toolUse: [{ name: 'note', input: { text: '1' } }] },
      { text: 'two', toolUse: [{ name: 'note', input: { text: '2' } }] },
      { text: 'three', toolUse: [{ name: 'note', input: { text: '3' } }] },
    );
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'loop forever' }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 2,
      maxTokens: 100,
    });
    assert.equal(result.steps, 2);
    assert.equal(result.stopReason, 'max_steps');
    assert.equal(result.text, 'two');
    assert.equal(fake.requests.length, 2);
    assert.equal(note.calls.length, 2, 'the last step’s calls still run');
    assert.equal(result.newMessages.at(-1)!.role, 'user', 'every tool call has its result');
    assert.equal(fake.pending, 1);
  });

  it('forces a tool on the first call only', async () => {
    const note = notebookTool();
    fake.enqueue({ toolUse: [{ name: 'note', input: { text: 'x' } }] }, { text: 'fine' });
    await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'go' }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 3,
      maxTokens: 100,
      toolChoice: { type: 'any' },
    });
    assert.deepEqual(fake.requests[0]!.body.tool_choice, { type: 'any' });
    assert.equal(fake.requests[1]!.body.tool_choice, undefined);
  });

  it('honours the abort signal between steps and during a call', async () => {
    const controller = new AbortController();
    const stopper: ToolHandler = {
      definition: { name: 'stop', description: 'Aborts the loop.', input_schema: { type: 'object' } },
      run() {
        controller.abort();
        return { content: 'stopping', isError: false };
      },
    };
    fake.enqueue({ toolUse: [{ name: 'stop', input: {} }] }, { text: 'should not be asked' });
    await assert.rejects(
      runToolLoop({
        model,
        system: 'sys',
        messages: [{ role: 'user', content: 'go' }],
        tools: [stopper],
        context: CONTEXT,
        maxSteps: 3,
        maxTokens: 100,
        signal: controller.signal,
      }),
      (error: unknown) => error instanceof ModelError && error.reason === 'aborted',
    );
    assert.equal(fake.requests.length, 1);
    fake.reset();

    fake.enqueue({ delayMs: 5_000, then: { text: 'late' } });
    await assert.rejects(
      runToolLoop({
        model,
        system: 'sys',
        messages: [{ role: 'user', content: 'go' }],
        tools: [],
        context: CONTEXT,
        maxSteps: 1,
        maxTokens: 100,
        signal: AbortSignal.timeout(100),
      }),
      (error: unknown) => error instanceof ModelError && (error.reason === 'timeout' || error.reason === 'aborted'),
    );
    // On a loaded machine the abandoned request may reach the fake only now: let it arrive
    // here, or it would take the reply the next test queues.
    for (let waited = 0; (fake.requests.length as number) === 0 && waited < 3000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  });

  it('does not run a tool call cut off by max_tokens; the model is told and may call it again', async () => {
    const note = notebookTool();
    fake.enqueue(
      {
        raw: {
          id: 'msg_cut',
          type: 'message',
          role: 'assistant',
          model: 'claude-test',
          content: [
            { type: 'text', text: 'Saving.' },
            { type: 'tool_use', id: 'tu_whole', name: 'note', input: { text: 'Ana likes tea' } },
            { type: 'tool_use', id: 'tu_cut', name: 'note', input: { text: 'Ana was born on' } },
          ],
          stop_reason: 'max_tokens',
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 100 },
        },
      },
      { toolUse: [{ name: 'note', input: { text: 'Ana was born on 1990-04-01' }, id: 'tu_again' }] },
      { text: 'Noted.' },
    );
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'remember' }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 4,
      maxTokens: 100,
    });
    assert.deepEqual(
      note.calls.map((call) => call.input),
      [{ text: 'Ana likes tea' }, { text: 'Ana was born on 1990-04-01' }],
      'the truncated call never ran',
    );
    const results = result.newMessages[1]!.content as Array<{ type: string; tool_use_id: string; is_error?: boolean; content: string }>;
    assert.deepEqual(results.map((block) => [block.tool_use_id, block.is_error === true]), [['tu_whole', false], ['tu_cut', true]]);
    assert.match(results[1]!.content, /max_tokens|cut off/);
    assert.equal(result.text, 'Noted.');
  });

  it('never sends a whitespace-only text block back (the API refuses them)', async () => {
    const note = notebookTool();
    fake.enqueue({ text: '\n\n', toolUse: [{ name: 'note', input: { text: 'x' }, id: 'tu_ws' }] }, { text: 'Done.' });
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'go' }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 3,
      maxTokens: 100,
    });
    assert.equal(result.text, 'Done.');
    const sent = fake.requests[1]!.body.messages as Array<{ role: string; content: Array<{ type: string; text?: string }> }>;
    for (const message of sent) {
      if (typeof message.content === 'string') continue;
      for (const block of message.content) {
        if (block.type === 'text') assert.notEqual(block.text!.trim(), '', `whitespace-only text in a ${message.role} message`);
      }
    }
    assert.deepEqual(sent[1]!.content.map((block) => block.type), ['tool_use']);
  });
  it('over its budget, drops what cannot be cut and cuts a list to whole results, oldest first, each result beside its call', async () => {
    const status: ToolHandler = {
      definition: { name: 'status', description: 'Says how things stand.', input_schema: { type: 'object' } },
      run: () => ({ isError: false, content: JSON.stringify({ state: 'green', detail: 'all systems nominal '.repeat(20) }) }),
    };
    const items = Array.from({ length: 10 }, (_, index) => ({ rank: index + 1, text: `finding ${index + 1}: ${'lorem ipsum '.repeat(10)}` }));
    const search: ToolHandler = {
      definition: { name: 'search', description: 'Searches.', input_schema: { type: 'object' } },
      run: () => ({ isError: false, content: JSON.stringify(items) }),
    };
    fake.enqueue(
      { toolUse: [{ name: 'status', input: {}, id: 'tu_status' }, { name: 'search', input: {}, id: 'tu_search' }] },
      { text: 'Answered.' },
    );
    const budget = { startTokens: 50, maxTokens: 450, estimate: estimateMessageTokens };
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'how are things?' }],
      tools: [status, search],
      context: CONTEXT,
      maxSteps: 4,
      maxTokens: 100,
      budget,
    });
    assert.equal(result.text, 'Answered.');
    assert.equal(result.droppedResults, 1);
    assert.equal(result.shortenedResults, 1);
    const sent = fake.requests[1]!.body;
    assert.equal(sent.tool_choice?.type, 'none');
    const results = sent.messages[2].content.filter((block: { type: string }) => block.type === 'tool_result');
    assert.deepEqual(results.map((block: { tool_use_id: string }) => block.tool_use_id), ['tu_status', 'tu_search'], 'every call keeps its result');
    // A JSON object cut would no longer parse: it is dropped whole.
    assert.equal(results[0].content, DROPPED_RESULT);
    const list = JSON.parse(results[1].content) as unknown[];
    const kept = list.slice(0, -1);
    assert.ok(kept.length >= 1 && kept.length < items.length, `kept ${kept.length}`);
    assert.deepEqual(kept, items.slice(0, kept.length));
    assert.equal(list.at(-1), `${items.length - kept.length} more results left out to fit the context window; a narrower query or a smaller limit may find more`);
    // Inside the budget by the budget's own estimate, ANSWER_NOW included; one more result would not be.
    const [calls, answered] = result.newMessages as [ModelMessage, ModelMessage];
    assert.equal(JSON.stringify(answered.content).includes(ANSWER_NOW), true);
    const estimateOf = (message: ModelMessage) => budget.startTokens + budget.estimate(calls) + budget.estimate(message);
    assert.ok(estimateOf(answered) <= budget.maxTokens, `estimated at ${estimateOf(answered)}`);
    const oneMore = structuredClone(answered);
    (oneMore.content as Array<{ content: string }>)[1]!.content = JSON.stringify([...items.slice(0, kept.length + 1), list.at(-1)]);
    assert.ok(estimateOf(oneMore) > budget.maxTokens, 'as many results as fit');
  });
  it('keeps a result no longer than the note that would replace it, and cuts the list after it', async () => {
    const saved = JSON.stringify({ id: 'm1', status: 'saved' });
    const save: ToolHandler = {
      definition: { name: 'save', description: 'Saves.', input_schema: { type: 'object' } },
      run: () => ({ isError: false, content: saved }),
    };
    const items = Array.from({ length: 10 }, (_, index) => ({ rank: index + 1, text: `finding ${index + 1}: ${'lorem ipsum '.repeat(10)}` }));
    const search: ToolHandler = {
      definition: { name: 'search', description: 'Searches.', input_schema: { type: 'object' } },
      run: () => ({ isError: false, content: JSON.stringify(items) }),
    };
    fake.enqueue({ toolUse: [{ name: 'save', input: {}, id: 'tu_save' }, { name: 'search', input: {}, id: 'tu_search' }] }, { text: 'Answered.' });
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: 'remember this and look it up' }],
      tools: [save, search],
      context: CONTEXT,
      maxSteps: 4,
      maxTokens: 100,
      budget: { startTokens: 50, maxTokens: 350, estimate: estimateMessageTokens },
    });
    assert.equal(result.text, 'Answered.');
    assert.equal(result.droppedResults ?? 0, 0);
    assert.equal(result.shortenedResults, 1);
    const results = fake.requests[1]!.body.messages[2].content.filter((block: { type: string }) => block.type === 'tool_result');
    assert.equal(results[0].content, saved, 'the save is not reported as failed');
    assert.equal(results[0].is_error, undefined);
    assert.ok(JSON.parse(results[1].content).length < items.length + 1);
  });

  /** Replaces `from` by `to` in every message that holds it (new objects for those), once `active()`. */
  function replacing(from: string, to: string, active: () => boolean): (messages: readonly ModelMessage[]) => ModelMessage[] | undefined {
    return (messages) => {
      if (!active() || !messages.some((message) => JSON.stringify(message).includes(from))) return undefined;
      return messages.map((message) => (JSON.stringify(message).includes(from) ? (JSON.parse(JSON.stringify(message).replaceAll(from, to)) as ModelMessage) : message));
    };
  }

  it('sends each request as beforeRequest has it, keeps the replacements, and its estimate follows them', async () => {
    let changed = false;
    const note: ToolHandler = {
      definition: { name: 'note', description: 'Writes a note.', input_schema: { type: 'object' } },
      run: () => {
        // The change arrives while the tool call is handled.
        changed = true;
        return { content: 'noted 1234-SECRET', isError: false };
      },
    };
    fake.enqueue({ text: 'You said 1234-SECRET.', toolUse: [{ name: 'note', input: { text: '1234-SECRET' }, id: 'tu_1' }] }, { text: 'Done.' });
    const original: ModelMessage = { role: 'user', content: [{ type: 'text', text: 'Ana: my code is 1234-SECRET' }] };
    const replacement = 'a much longer text standing where the code was, longer than the code';
    const estimates: Array<{ estimatedTokens: number; toolTokens: number }> = [];
    const budget = { startTokens: 50, maxTokens: 100_000, estimate: estimateMessageTokens, toolEstimate: estimateToolBlockTokens };
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [original],
      tools: [note],
      context: CONTEXT,
      maxSteps: 3,
      maxTokens: 100,
      budget,
      beforeRequest: replacing('1234-SECRET', replacement, () => changed),
      onRequest: ({ estimatedTokens, toolTokens }) => estimates.push({ estimatedTokens, toolTokens }),
    });
    assert.equal(result.text, 'Done.');
    assert.ok(JSON.stringify(fake.requests[0]!.body.messages).includes('1234-SECRET'), 'the first request was sent before the change');
    const second = JSON.stringify(fake.requests[1]!.body.messages);
    assert.ok(!second.includes('1234-SECRET'), 'the second request carries none of the old text');
    assert.ok(second.includes(replacement));
    assert.deepEqual(fake.requests[1]!.body.messages[1].content[1], { type: 'tool_use', id: 'tu_1', name: 'note', input: { text: replacement } });
    assert.equal(fake.requests[1]!.body.messages[2].content[0].tool_use_id, 'tu_1');
    assert.ok(!JSON.stringify(result.newMessages).includes('1234-SECRET'), 'what the loop returns is what it sent');
    assert.equal((original.content as Array<{ text: string }>)[0]!.text, 'Ana: my code is 1234-SECRET', 'the caller\'s messages are not modified');

    const base = JSON.parse(JSON.stringify(original).replaceAll('1234-SECRET', replacement)) as ModelMessage;
    const added = result.newMessages.slice(0, 2);
    const sum = (estimate: (message: ModelMessage) => number): number => added.reduce((total, message) => total + estimate(message), 0);
    assert.deepEqual(estimates[1], {
      estimatedTokens: budget.startTokens + estimateMessageTokens(base) - estimateMessageTokens(original) + sum(estimateMessageTokens),
      toolTokens: sum(estimateToolBlockTokens),
    });
  });

  it('sends the system prompt beforeSystem gives, from the request after the change on, and its estimate follows it', async () => {
    let changed = false;
    const note: ToolHandler = {
      definition: { name: 'note', description: 'Writes a note.', input_schema: { type: 'object' } },
      run: () => {
        changed = true;
        return { content: 'ok', isError: false };
      },
    };
    fake.enqueue({ toolUse: [{ name: 'note', input: {}, id: 'tu_1' }] }, { text: 'Done.' });
    const quoting = 'sys\n\nsummary: the code is 1234-SECRET';
    const withheld = 'sys\n\nsummary withheld';
    const estimates: number[] = [];
    const budget = { startTokens: 500, maxTokens: 100_000, estimate: estimateMessageTokens };
    await runToolLoop({
      model,
      system: quoting,
      systemBreaks: [3],
      messages: [{ role: 'user', content: 'hi' }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 3,
      maxTokens: 100,
      budget,
      beforeSystem: () => (changed ? { system: withheld, systemBreaks: [3] } : undefined),
      onRequest: ({ estimatedTokens }) => estimates.push(estimatedTokens),
    });
    assert.ok(systemText(fake.requests[0]!.body).includes('1234-SECRET'), 'the first request was sent before the change');
    assert.equal(systemText(fake.requests[1]!.body), withheld);
    const appended = estimates[1]! - estimates[0]!;
    const shrunk = estimateMessageTokens({ role: 'user', content: quoting }) - estimateMessageTokens({ role: 'user', content: withheld });
    assert.ok(shrunk > 0);
    const added = estimateMessageTokens(fake.requests[1]!.body.messages[1]) + estimateMessageTokens(fake.requests[1]!.body.messages[2]);
    assert.ok(Math.abs(appended - (added - shrunk)) <= 2, `estimate moved by ${appended}, expected about ${added - shrunk}`);
  });

  it('ends tool use when beforeRequest grows a request past its budget', async () => {
    let changed = false;
    const note: ToolHandler = {
      definition: { name: 'note', description: 'Writes a note.', input_schema: { type: 'object' } },
      run: () => {
        changed = true;
        return { content: 'ok', isError: false };
      },
    };
    fake.enqueue({ toolUse: [{ name: 'note', input: {}, id: 'tu_1' }] }, { text: 'Answered.' });
    const result = await runToolLoop({
      model,
      system: 'sys',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Ana: short' }] }],
      tools: [note],
      context: CONTEXT,
      maxSteps: 4,
      maxTokens: 100,
      budget: { startTokens: 50, maxTokens: 400, estimate: estimateMessageTokens },
      beforeRequest: replacing('Ana: short', `Ana: ${'a long edit '.repeat(200)}`, () => changed),
    });
    assert.equal(result.text, 'Answered.');
    const second = fake.requests[1]!.body;
    assert.deepEqual(second.tool_choice, { type: 'none' }, 'no more tools once the request is over its budget');
    assert.ok(JSON.stringify(second.messages).includes(ANSWER_NOW));
  });

  it('refuses a beforeRequest that adds or removes messages', async () => {
    fake.enqueue({ text: 'unused' });
    await assert.rejects(
      runToolLoop({
        model,
        system: 'sys',
        messages: [{ role: 'user', content: 'hi' }],
        tools: [],
        context: CONTEXT,
        maxSteps: 1,
        maxTokens: 100,
        beforeRequest: () => [],
      }),
      TypeError,
    );
    assert.equal(fake.requests.length, 0, 'nothing was sent');
  });
});
