import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { HistoryEntry, SummaryEntry } from '../src/context/types.js';
import { createLlmSummarizer } from '../src/compaction/llm-summarizer.js';
import type { SummarizeRequest } from '../src/compaction/summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { CompactionSettings, LlmSettings } from '../src/config/types.js';
import { createAnthropicModel, ModelError, type ChatModel } from '../src/llm/index.js';
import type { ToolContext, ToolHandler } from '../src/llm/tool.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';

const TYPES = ['fact', 'preference', 'decision', 'identity', 'event', 'observation', 'goal', 'todo'];

/** Stands in for the memory module's memory_save: same name and input contract, kept in a list. */
function recordingMemorySave(): ToolHandler & { saved: Array<{ input: Record<string, unknown>; context: ToolContext }> } {
  const saved: Array<{ input: Record<string, unknown>; context: ToolContext }> = [];
  return {
    saved,
    definition: {
      name: 'memory_save',
      description: 'Saves one memory.',
      input_schema: {
        type: 'object',
        properties: {
          content: { type: 'string' },
          memory_type: { type: 'string', enum: TYPES },
          importance: { type: 'number' },
        },
        required: ['content', 'memory_type'],
      },
    },
    run(input, context) {
      const record = input as Record<string, unknown>;
      if (typeof record['content'] !== 'string' || record['content'].trim() === '') {
        return { isError: true, content: 'content must be a non-empty string' };
      }
      if (!TYPES.includes(String(record['memory_type']))) {
        return { isError: true, content: `memory_type must be one of ${TYPES.join(', ')}` };
      }
      saved.push({ input: record, context });
      return { isError: false, content: JSON.stringify({ id: `mem_${saved.length}`, status: 'saved' }) };
    },
  };
}

function entry(seq: number, authorName: string, content: string): HistoryEntry {
  return {
    seq,
    channelId: 'chan-1',
    messageId: `m${seq}`,
    kind: 'message',
    role: 'user',
    authorId: `u-${authorName}`,
    authorName,
    content,
    createdAt: Date.UTC(2026, 10, 20, 9, seq),
    tokens: 10,
    turnId: seq,
  };
}

const ENTRIES = [
  entry(1, 'Priya', 'I moved to Lisbon last month, so my time zone is WET now.'),
  entry(2, 'Tomás', 'We decided: release v2.3.1 ships on 2026-12-01, ticket MAG-481.'),
  entry(3, 'Priya', 'I will write the changelog by Friday.'),
];

function settings(overrides: Partial<CompactionSettings> = {}): CompactionSettings {
  return { ...DEFAULTS.defaults.compaction, maxWorkerTurns: 4, workerTimeoutMs: 5_000, summaryMaxTokens: 700, ...overrides };
}

function request(overrides: Partial<SummarizeRequest> = {}): SummarizeRequest {
  return {
    channelId: 'chan-1',
    location: { channelId: 'chan-1', guildId: 'guild-9' },
    priorSummaries: [],
    entries: ENTRIES,
    settings: settings(),
    signal: new AbortController().signal,
    ...overrides,
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a failure');
}

describe('createLlmSummarizer', () => {
  let fake: FakeAnthropic;
  let model: ChatModel;
  before(async () => {
    fake = await startFakeAnthropic();
    const llm: LlmSettings = {
      ...DEFAULTS.llm,
      model: 'claude-test',
      baseUrl: fake.baseUrl,
      apiKeyEnv: 'MAGPIE_TEST_KEY',
      timeoutMs: 3_000,
      maxRetries: 0,
      maxConcurrentCalls: 2,
    };
    model = createAnthropicModel(llm, { env: { MAGPIE_TEST_KEY: 'k' } });
  });
  after(async () => {
    await fake.close();
  });
  beforeEach(() => fake.reset());

  it('saves memories with memory_save and returns the summary', async () => {
    const memorySave = recordingMemorySave();
    fake.enqueue(
      {
        toolUse: [
          { name: 'memory_save', input: { content: 'Priya lives in Lisbon (WET)', memory_type: 'identity', importance: 0.9 } },
          { name: 'memory_save', input: { content: 'Release v2.3.1 ships 2026-12-01 (MAG-481)', memory_type: 'decision' } },
        ],
      },
      { text: '  Priya moved to Lisbon. Tomás announced v2.3.1 for 2026-12-01 (MAG-481); Priya owes the changelog by Friday.  ' },
    );
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave } });
    assert.equal(summarizer.name, 'llm');
    const result = await summarizer.summarize(request());
    assert.equal(
      result.summary,
      'Priya moved to Lisbon. Tomás announced v2.3.1 for 2026-12-01 (MAG-481); Priya owes the changelog by Friday.',
    );
    assert.equal(result.memoriesSaved, 2);
    assert.equal(memorySave.saved.length, 2);
    const context = memorySave.saved[0]!.context;
    assert.equal(context.channelId, 'chan-1');
    assert.equal(context.guildId, 'guild-9');
    assert.deepEqual(context.sourceMessageIds, ['m1', 'm2', 'm3']);

    const first = fake.requests[0]!.body;
    assert.deepEqual(
      first.tools.map((tool: { name: string }) => tool.name),
      ['memory_save'],
      'the worker is offered memory_save only',
    );
    assert.match(first.system, /memory_save/);
    assert.match(first.system, /chronological/);
    assert.equal(first.max_tokens, 700);
    const userText: string = first.messages[0].content;
    assert.match(userText, /Priya \(msg m1\): I moved to Lisbon/);
    assert.match(userText, /MAG-481/);
    assert.match(userText, /2026-11-20 09:01/);
  });

  it('folds earlier summaries into a roll-up', async () => {
    const prior: SummaryEntry[] = [
      { id: 1, channelId: 'chan-1', kind: 'summary', fromSeq: 1, toSeq: 40, content: 'Week one: the team picked SQLite.', tokens: 9, createdAt: 0 },
      { id: 2, channelId: 'chan-1', kind: 'summary', fromSeq: 41, toSeq: 90, content: 'Week two: Priya joined.', tokens: 6, createdAt: 0 },
    ];
    fake.enqueue({ text: 'The team picked SQLite; Priya joined.' });
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave: recordingMemorySave() } });
    const result = await summarizer.summarize(request({ priorSummaries: prior, entries: [] }));
    assert.equal(result.summary, 'The team picked SQLite; Priya joined.');
    assert.equal(result.memoriesSaved, 0);
    const userText: string = fake.requests[0]!.body.messages[0].content;
    assert.ok(userText.indexOf('Week one') < userText.indexOf('Week two'));
    assert.match(userText, /one summary covering everything/);
  });

  it('throws empty_summary when the model writes nothing', async () => {
    fake.enqueue({ text: '   \n ' });
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave: recordingMemorySave() } });
    const error = await rejection(summarizer.summarize(request()));
    assert.ok(error instanceof ModelError, String(error));
    assert.equal(error.reason, 'empty_summary');
  });

  it('answers malformed memory_save input with tool errors and still summarizes', async () => {
    const memorySave = recordingMemorySave();
    fake.enqueue(
      {
        toolUse: [
          { name: 'memory_save', input: '{not json' },
          { name: 'memory_save', input: { content: '', memory_type: 'fact' } },
          { name: 'memory_save', input: { content: 'x', memory_type: 'gossip' } },
          { name: 'memory_search', input: { query: 'anything' } },
          { name: 'memory_save', input: { content: 'Priya writes the changelog by Friday', memory_type: 'todo' } },
        ],
      },
      { text: 'Summary after a few bad calls.' },
    );
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave } });
    const result = await summarizer.summarize(request());
    assert.equal(result.summary, 'Summary after a few bad calls.');
    assert.equal(result.memoriesSaved, 1);
    const results = fake.requests[1]!.body.messages[2].content as Array<{ is_error?: boolean; content: string }>;
    assert.deepEqual(
      results.map((block) => block.is_error === true),
      [true, true, true, true, false],
    );
    assert.match(results[3]!.content, /unknown tool memory_search/);
  });

  it('keeps the last turn for the summary when the model only saves', async () => {
    const memorySave = recordingMemorySave();
    const save = (content: string) => ({ toolUse: [{ name: 'memory_save', input: { content, memory_type: 'fact' } }] });
    fake.enqueue(save('one'), save('two'), { text: 'Forced summary.' });
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave } });
    const result = await summarizer.summarize(request({ settings: settings({ maxWorkerTurns: 3 }) }));
    assert.equal(result.summary, 'Forced summary.');
    assert.equal(result.memoriesSaved, 2);
    assert.equal(fake.requests.length, 3, 'never more calls than maxWorkerTurns');
    const last = fake.requests[2]!.body;
    assert.deepEqual(last.tool_choice, { type: 'none' });
    assert.match(last.messages.at(-1).content, /summary only/);
  });

  it('gives up at workerTimeoutMs even when the caller never aborts', async () => {
    fake.enqueue({ delayMs: 10_000, then: { text: 'too late' } });
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave: recordingMemorySave() } });
    const error = await rejection(summarizer.summarize(request({ settings: settings({ workerTimeoutMs: 150 }) })));
    assert.ok(error instanceof ModelError, String(error));
    assert.equal(error.reason, 'timeout');
  });

  it('stops when the caller aborts', async () => {
    fake.enqueue({ delayMs: 10_000, then: { text: 'too late' } });
    const controller = new AbortController();
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave: recordingMemorySave() } });
    const pending = summarizer.summarize(request({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 50);
    const error = await rejection(pending);
    assert.ok(error instanceof ModelError);
    assert.equal(error.reason, 'aborted');
  });

  it('passes model failures through as ModelError', async () => {
    // Every request gets the 529, so a late request of the abort test above cannot take it.
    fake.setDefault({ status: 529, message: 'overloaded' });
    const summarizer = createLlmSummarizer({ model, memoryTools: { memorySave: recordingMemorySave() } });
    const error = await rejection(summarizer.summarize(request()));
    assert.ok(error instanceof ModelError);
    assert.equal(error.status, 529);
    assert.equal(error.retryable, true);
  });
});
