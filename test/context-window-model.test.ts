/**
 * The estimate against the real count, through the real SDK and the fake Messages API counting
 * tokens like a server would and refusing what does not fit (`maxInputTokens`).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { APOLOGY_REPLY } from '../src/app/channel-responder.js';
import { runAgentTurn } from '../src/channel/agent-turn.js';
import type { ChannelSettings } from '../src/config/types.js';
import { ANSWER_NOW, DROPPED_RESULT } from '../src/llm/index.js';
import { definitionsOf, type ToolHandler, type ToolOutcome } from '../src/llm/tool.js';
import { characterTokenCounter, startFakeAnthropic, type FakeAnthropic, type FakeAnthropicOptions } from './fakes/fake-anthropic.js';
import { isAgentRequest, lastUserText, testConfig } from './discord-helpers.js';
import { appEnv } from './support/storage.js';

interface Context {
  app: MagpieApp;
  fake: FakeAnthropic;
}

async function withModel(
  fakeOptions: FakeAnthropicOptions,
  defaults: Partial<ChannelSettings>,
  work: (context: Context) => Promise<void>,
): Promise<void> {
  const fake = await startFakeAnthropic(fakeOptions);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-window-'));
  const app = await openApp({ config: testConfig({ baseUrl: fake.baseUrl, dataDir, defaults }), env: appEnv() });
  try {
    await work({ app, fake });
  } finally {
    await app.close();
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function message(channelId: string, index: number, content: string) {
  return { messageId: `m${index}`, channelId, guildId: 'g1', authorId: 'u1', authorName: 'Mei', role: 'user' as const, content, createdAt: Date.UTC(2026, 0, 1) + index * 60_000 };
}

async function turn(app: MagpieApp, channelId: string, tools: ToolHandler[] = app.tools) {
  return app.runtime.runSerial(channelId, () =>
    runAgentTurn({
      runtime: app.runtime,
      channelId,
      model: app.model!,
      tools,
      settings: app.config.settingsFor(channelId),
      context: { channelId, guildId: 'g1' },
    }),
  );
}

const CJK = '我们明天下午三点在会议室讨论新版本的发布计划请大家准备好各自的进度报告和遇到的问题谢谢配合';

test('a Chinese channel is calibrated on the first answer, never refused, and compacts at the tiers by the real count', async () => {
  const count = characterTokenCounter();
  await withModel({ countTokens: count, maxInputTokens: 6000 }, { contextWindow: 6000, maxResponseTokens: 200 }, async ({ app, fake }) => {
    fake.setDefault((request) => (isAgentRequest(request.body) ? { text: '好的，记下了。' } : { text: '摘要：大家商量了发布计划和会议时间。' }));
    const channelId = 'zh';
    const realCount = async () => count({ body: await app.runtime.buildModelRequest(channelId, { tools: definitionsOf(app.tools), maxTokens: 200 }) } as never);
    // The real count of the context at the moment each tier fired.
    const fired: Array<{ tier: string; real: number; usage: number; factor: number }> = [];
    const counting: Promise<void>[] = [];
    app.events.subscribe((event) => {
      if (event.type === 'compaction_triggered' && event.channel_id === channelId) {
        // The request is taken as it is now; its quotes are looked up before it is counted.
        const request = app.runtime.buildModelRequest(channelId, { tools: definitionsOf(app.tools), maxTokens: 200 });
        counting.push(
          request.then((body) => {
            fired.push({ tier: String(event.tier), real: count({ body } as never) / Number(event.usable_window), usage: Number(event.usage), factor: Number(event.calibration_factor) });
          }),
        );
      }
    });
    for (let index = 0; index < 70; index += 1) {
      await app.runtime.ingest(message(channelId, index, `第${index}条：${CJK.slice(index % 7)}${CJK}`));
      await turn(app, channelId);
    }
    await app.responder.idle();
    assert.equal(fake.refusedTooLong, 0, 'no request was refused as too long');
    const status = await app.runtime.status(channelId);
    assert.ok(status.calibration.factor > 2, `a CJK channel counts well above 4 characters a token (factor ${status.calibration.factor})`);
    const real = await realCount();
    await Promise.all(counting);
    assert.ok(Math.abs(status.calibratedTokens - real) / real < 0.1, `/context figure ${status.calibratedTokens} within 10% of the real count ${real}`);
    const calibrated = fired.filter((event) => event.factor > 1.5);
    assert.ok(calibrated.some((event) => event.tier === 'background' || event.tier === 'aggressive'), `a worker tier fired: ${JSON.stringify(fired)}`);
    for (const event of calibrated) {
      // Fired on the corrected estimate, which tracks the real count.
      assert.ok(Math.abs(event.real - event.usage) <= 0.1 * event.usage, `tier ${event.tier} at real usage ${event.real}, estimated ${event.usage}`);
    }
    // Every agent request the fake saw fit its window.
    for (const request of fake.requests) assert.ok((request.inputTokens ?? 0) <= 6000);
  });
});

test('a tool loop with large results ends tool use before a request would exceed the window', async () => {
  const lookup: ToolHandler = {
    definition: { name: 'lookup', description: 'Looks things up.', input_schema: { type: 'object', properties: { query: { type: 'string' } } } },
    run: (input) => ({ content: `Result for ${JSON.stringify(input)}: ${'data '.repeat(500)}`, isError: false }),
  };
  await withModel({ countTokens: characterTokenCounter(), maxInputTokens: 3000 }, { contextWindow: 3000, maxResponseTokens: 200, maxAgentSteps: 12 }, async ({ app, fake }) => {
    let calls = 0;
    fake.setDefault((request) => {
      if (request.body.tool_choice?.type === 'none') return { text: 'Here is what I found.' };
      calls += 1;
      return { toolUse: [{ name: 'lookup', input: { query: `q${calls}` } }] };
    });
    await app.runtime.ingest(message('tools', 1, 'Please look up everything about the release.'));
    const result = await turn(app, 'tools', [lookup]);
    assert.equal(fake.refusedTooLong, 0, 'never a refused request');
    assert.equal(result.reply, 'Here is what I found.');
    const last = fake.requests.at(-1)!.body;
    assert.equal(last.tool_choice?.type, 'none', 'the model was told to answer without tools');
    assert.ok(JSON.stringify(last.messages).includes(ANSWER_NOW));
    assert.ok(JSON.stringify(last.messages).includes(DROPPED_RESULT), 'the oldest results were dropped');
    for (const request of fake.requests) assert.ok(request.inputTokens! <= 3000 - 200, `request of ${request.inputTokens} tokens leaves the answer its room`);
    assert.ok(calls >= 2, 'tools did run before the window filled');
  });
});

/** Runs `tool` as given and keeps what it answered, so a test sees the result before the loop fitted it. */
function recording(tool: ToolHandler): ToolHandler & { outcomes: ToolOutcome[] } {
  const outcomes: ToolOutcome[] = [];
  return {
    outcomes,
    definition: tool.definition,
    run: async (input, context) => {
      const outcome = await tool.run(input, context);
      outcomes.push(outcome);
      return outcome;
    },
  };
}

/** A model that calls `name` once with `input`, then answers in text (always when told to answer now). */
function callOnceThenAnswer(fake: FakeAnthropic, name: string, input: Record<string, unknown>): void {
  fake.setDefault((request) => {
    if (!isAgentRequest(request.body)) return { text: 'Summary.' };
    const last = request.body.messages.at(-1);
    const answered = Array.isArray(last?.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
    return request.body.tool_choice?.type === 'none' || answered ? { text: 'Here is what I recall.' } : { toolUse: [{ name, input }] };
  });
}

/** The result the last request carried for the turn's only tool call. */
function lastToolResult(fake: FakeAnthropic): { content: string; is_error?: boolean } {
  const blocks = fake.requests.at(-1)!.body.messages.flatMap((message: { content: unknown }) => (Array.isArray(message.content) ? message.content : []));
  const results = blocks.filter((block: { type: string }) => block.type === 'tool_result');
  assert.equal(results.length, 1, 'one tool result, still paired with its call');
  return results[0];
}

const WORDS = ['harbor', 'violet', 'granite', 'lantern', 'meadow', 'cobalt', 'ember', 'falcon', 'juniper', 'quartz', 'saffron', 'thistle', 'willow', 'zephyr', 'marble', 'orchid'];

test('a memory_search answer larger than the room left is cut to its best whole results, with a note, and never refused', async () => {
  const window = 3000;
  await withModel({ countTokens: characterTokenCounter(), contextWindow: window }, { contextWindow: window, maxResponseTokens: 200 }, async ({ app, fake }) => {
    const channelId = 'recall';
    const location = { channelId, guildId: 'g1' };
    for (let index = 0; index < 20; index += 1) {
      const words = Array.from({ length: 36 }, (_, offset) => WORDS[(index * 7 + offset * 5) % WORDS.length]).join(' ');
      const saved = await app.memory.save({ location, content: `Release fact ${index + 1}: build ${1000 + index} ${words}.`, memoryType: 'fact' });
      assert.equal(saved.status, 'saved');
    }
    const search = recording(app.tools.find((tool) => tool.definition.name === 'memory_search')!);
    const tools = app.tools.map((tool) => (tool.definition.name === 'memory_search' ? search : tool));
    callOnceThenAnswer(fake, 'memory_search', { query: 'release fact build', limit: 20 });
    await app.runtime.ingest(message(channelId, 1, 'What do we know about the release builds?'));
    // What the turn stores in history, seen as it is appended (a compaction may follow at once).
    const stored: string[] = [];
    const runtime = Object.create(app.runtime) as typeof app.runtime;
    runtime.appendToTurn = (id, entries, turnId) => {
      for (const entry of entries) if (entry.kind === 'tool_result') stored.push(entry.content);
      return app.runtime.appendToTurn(id, entries, turnId);
    };
    const result = await app.runtime.runSerial(channelId, () =>
      runAgentTurn({ runtime, channelId, model: app.model!, tools, settings: app.config.settingsFor(channelId), context: location }),
    );

    assert.equal(fake.refusedTooLong, 0, 'never a refused request');
    assert.equal(result.reply, 'Here is what I recall.');
    for (const request of fake.requests) assert.ok(request.inputTokens! + request.body.max_tokens <= window, `request of ${request.inputTokens} tokens and max_tokens ${request.body.max_tokens} fits`);
    const full = JSON.parse(search.outcomes[0]!.content) as unknown[];
    assert.equal(full.length, 20, 'the search found every fact');
    const sent = lastToolResult(fake);
    assert.notEqual(sent.content, DROPPED_RESULT);
    assert.notEqual(sent.is_error, true);
    const shortened = JSON.parse(sent.content) as unknown[];
    const kept = shortened.slice(0, -1);
    const note = shortened.at(-1);
    assert.ok(kept.length >= 2 && kept.length < full.length, `kept ${kept.length} of ${full.length}`);
    assert.deepEqual(kept, full.slice(0, kept.length), 'whole results, the best first, as the search ranked them');
    assert.equal(typeof note, 'string');
    assert.match(note as string, new RegExp(`^${full.length - kept.length} more results left out`));
    assert.match(note as string, /narrower query/);
    assert.match(note as string, /limit/);
    // History keeps what the model was sent, not the whole answer.
    assert.deepEqual(stored.map((json) => (JSON.parse(json) as { content: string }).content), [sent.content]);
  });
});

test('a result list of which not even one result fits is still dropped whole', async () => {
  const huge: ToolHandler = {
    definition: { name: 'records', description: 'Lists records.', input_schema: { type: 'object', properties: {} } },
    run: () => ({ isError: false, content: JSON.stringify([1, 2, 3].map((index) => ({ id: index, text: `record ${index} ${'payload '.repeat(2000)}` }))) }),
  };
  await withModel({ countTokens: characterTokenCounter(), contextWindow: 4000 }, { contextWindow: 4000, maxResponseTokens: 200 }, async ({ app, fake }) => {
    callOnceThenAnswer(fake, 'records', {});
    await app.runtime.ingest(message('records', 1, 'List the records.'));
    const result = await turn(app, 'records', [...app.tools, huge]);
    assert.equal(fake.refusedTooLong, 0);
    assert.equal(result.reply, 'Here is what I recall.');
    const sent = lastToolResult(fake);
    assert.equal(sent.content, DROPPED_RESULT);
    assert.equal(sent.is_error, true);
  });
});

test('a long text result is cut at a line boundary with a note saying how many lines were left out', async () => {
  const lines = Array.from({ length: 400 }, (_, index) => `line ${index + 1}: ${WORDS[index % WORDS.length]} ${WORDS[(index * 3) % WORDS.length]} status ok`);
  const log: ToolHandler = {
    definition: { name: 'read_log', description: 'Reads the log.', input_schema: { type: 'object', properties: {} } },
    run: () => ({ isError: false, content: lines.join('\n') }),
  };
  await withModel({ countTokens: characterTokenCounter(), contextWindow: 4000 }, { contextWindow: 4000, maxResponseTokens: 200 }, async ({ app, fake }) => {
    callOnceThenAnswer(fake, 'read_log', {});
    await app.runtime.ingest(message('log', 1, 'What does the log say?'));
    const result = await turn(app, 'log', [...app.tools, log]);
    // The channel's first turn: its estimate does not know yet of the API's tool-use prompt, which
    // the first response's count shows, and the cut request must leave room for it.
    assert.equal(fake.refusedTooLong, 0);
    for (const request of fake.requests) assert.ok(request.inputTokens! + request.body.max_tokens <= 4000);
    assert.equal(result.reply, 'Here is what I recall.');
    const sent = lastToolResult(fake);
    assert.notEqual(sent.is_error, true);
    const sentLines = sent.content.split('\n');
    const kept = sentLines.slice(0, -1);
    assert.ok(kept.length >= 1 && kept.length < lines.length, `kept ${kept.length} lines`);
    assert.deepEqual(kept, lines.slice(0, kept.length), 'whole lines, from the start');
    assert.match(sentLines.at(-1)!, new RegExp(`${lines.length - kept.length} more lines left out`));
  });
});

test('a 50,000-character message is in its own turn, cut with a note, and the reply says so', async () => {
  await withModel({ countTokens: characterTokenCounter(), maxInputTokens: 8000 }, { contextWindow: 8000, maxResponseTokens: 512 }, async ({ app, fake }) => {
    fake.setDefault((request) =>
      isAgentRequest(request.body) && lastUserText(request.body).includes('too long to read whole') ? { text: 'I could only read the beginning.' } : { text: 'I read it all.' },
    );
    const channelId = 'paste';
    for (let index = 0; index < 5; index += 1) await app.runtime.ingest(message(channelId, index, `Short note ${index} about the plan.`));
    const words = Array.from({ length: 9000 }, (_, index) => `w${index % 97}`).join(' ');
    const paste = `${words} ${'x'.repeat(Math.max(0, 50_000 - words.length - 10))} quasartailword`;
    assert.ok(paste.length >= 50_000);
    await app.runtime.ingest(message(channelId, 99, paste));
    // Still live when its turn comes (the check after ingest did not drop it).
    assert.equal((await app.runtime.liveContext(channelId)).entries.at(-1)?.messageId, 'm99');
    const result = await turn(app, channelId);
    assert.equal(fake.refusedTooLong, 0);
    assert.match(result.reply, /^\(Your message was too long for me to read whole: I read the first [\d,]+ of its [\d,]+ characters/);
    assert.match(result.reply, /I could only read the beginning\./);
    const sent = lastUserText(fake.requests.filter((request) => isAgentRequest(request.body)).at(-1)!.body);
    assert.ok(sent.length < 8000 * 4 && !sent.includes('quasartailword'), 'the request carried it cut');
    // The whole text is archived and searchable, the end included.
    const hits = await app.memory.search({ location: { channelId, guildId: 'g1' }, query: 'quasartailword' });
    assert.ok(hits.some((hit) => hit.source_ids.includes('m99')), JSON.stringify(hits.map((hit) => hit.source_ids)));
  });
});

test('a context overflow is recovered: factor learnt from the error, emergency truncation, one retry, an answer', async () => {
  // Every character a token: the 4-characters-per-token estimate is 4× too low and nothing has calibrated it yet.
  await withModel({ countTokens: characterTokenCounter({ charsPerToken: 1 }), maxInputTokens: 6000 }, { contextWindow: 6000, maxResponseTokens: 200 }, async ({ app, fake }) => {
    fake.setDefault({ text: 'Answer after recovery.' });
    const channelId = 'over';
    let index = 0;
    while ((await app.runtime.status(channelId)).usage < 0.4) {
      await app.runtime.ingest(message(channelId, index, `Message ${index}: ${'lorem ipsum dolor '.repeat(4)}`));
      index += 1;
    }
    const sent: string[] = [];
    const outcome = await app.responder.respond({
      channelId,
      userId: 'u1',
      rateLimit: false,
      context: { channelId, guildId: 'g1' },
      target: { send: async (text) => (sent.push(text), 'r1') },
    });
    assert.equal(outcome, 'replied');
    assert.deepEqual(sent, ['Answer after recovery.'], 'no apology: the retry answered');
    assert.equal(fake.refusedTooLong, 1);
    const status = await app.runtime.status(channelId);
    assert.ok(status.calibration.factor > 3, `factor from the error's numbers: ${status.calibration.factor}`);
    assert.ok(status.usage < 0.95);
  });
});

test('the apology comes only when the retry fails too', async () => {
  await withModel({ countTokens: characterTokenCounter({ charsPerToken: 1 }), maxInputTokens: 50 }, { contextWindow: 6000, maxResponseTokens: 200 }, async ({ app, fake }) => {
    fake.setDefault({ text: 'never' });
    await app.runtime.ingest(message('tiny', 1, 'hello there'));
    const sent: string[] = [];
    const outcome = await app.responder.respond({
      channelId: 'tiny',
      userId: 'u1',
      rateLimit: false,
      context: { channelId: 'tiny' },
      target: { send: async (text) => (sent.push(text), 'r1') },
    });
    assert.equal(outcome, 'failed');
    assert.deepEqual(sent, [APOLOGY_REPLY]);
    assert.equal(fake.refusedTooLong, 2, 'one retry, no more');
  });
});

test('the fake refuses an over-long prompt with the Anthropic error shape, and the SDK error says context overflow', async () => {
  const fake = await startFakeAnthropic({ countTokens: characterTokenCounter(), maxInputTokens: 10 });
  try {
    fake.enqueue({ text: 'kept for later' });
    const response = await fetch(`${fake.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: '这是一条很长很长的中文消息，超过了十个词元的限制。' }] }),
    });
    assert.equal(response.status, 400);
    const body = (await response.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(body.type, 'error');
    assert.equal(body.error.type, 'invalid_request_error');
    assert.match(body.error.message, /^prompt is too long: \d+ tokens > 10 maximum$/);
    assert.equal(fake.pending, 1, 'the queued reply was not consumed');
    assert.equal(fake.refusedTooLong, 1);
    assert.ok(fake.requests[0]!.inputTokens! > 10);
  } finally {
    await fake.close();
  }
});

test('agent turns pass the same tool definitions every turn (counted once per configuration)', async () => {
  await withModel({ countTokens: characterTokenCounter() }, { contextWindow: 50_000 }, async ({ app, fake }) => {
    fake.setDefault({ text: 'ok' });
    const seen: unknown[] = [];
    const runtime = app.runtime;
    const spy = Object.create(runtime) as typeof runtime;
    spy.buildModelRequest = (channelId, options) => {
      seen.push(options.tools);
      return runtime.buildModelRequest(channelId, options);
    };
    for (let index = 0; index < 3; index += 1) {
      // Long enough for the messages, not only the prompt and tools, to say something to calibration.
      await runtime.ingest(message('defs', index, `hello ${index} ${'and more words '.repeat(30)}`));
      await runAgentTurn({ runtime: spy, channelId: 'defs', model: app.model!, tools: app.tools, settings: app.config.settingsFor('defs'), context: { channelId: 'defs' } });
    }
    assert.equal(seen.length, 3);
    assert.ok(seen.every((tools) => tools === seen[0]), 'one definitions array for every turn');
    assert.equal(seen[0], definitionsOf(app.tools));
    // The usage reported by the fake is its own count: the calibration saw it.
    assert.ok((await app.runtime.status('defs')).calibration.observations >= 1);
  });
});
