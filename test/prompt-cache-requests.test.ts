import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runAgentTurn } from '../src/channel/agent-turn.js';
import type { ChatModel, ModelUsage } from '../src/llm/chat-model.js';
import { budgetTokens, wholeInputTokens } from '../src/llm/usage.js';
import {
  contextFor,
  isBranchRequest,
  isCompactionRequest,
  isWorkerRequest,
  say,
  startAgents,
  waitFor,
  type AgentsHarness,
} from './branch-worker-support.js';
import type { RecordedRequest } from './fakes/fake-anthropic.js';
import { breakpointsOf, FakePromptCache, systemText, type CachedUsage } from './fakes/fake-prompt-cache.js';

const MINUTE = 60_000;

function filler(index: number): string {
  return `note ${index}: ${'the garden plan needs tomatoes, beans, a new fence and water on Mondays. '.repeat(3)}`;
}

/** The last user message answers a tool call: the loop's second step. */
function answersTool(request: RecordedRequest): boolean {
  const last = request.body.messages.at(-1) as { content: unknown };
  return Array.isArray(last.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
}

function whole(usage: CachedUsage): number {
  return usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
}

describe('prompt-cache breakpoints in every request the bot sends', () => {
  const clock = { now: 0 };
  const cache = new FakePromptCache({ now: () => clock.now });
  const channel = 'cached-channel';
  let agents: AgentsHarness;
  const usages: ModelUsage[] = [];
  let model: ChatModel;

  before(async () => {
    agents = await startAgents({ fake: { promptCache: cache }, defaults: { contextWindow: 100_000 } });
    agents.model.setDefault((request) => {
      if (isCompactionRequest(request)) {
        return answersTool(request) ? { text: `Summary ${agents.model.requests.length}: ${'they planned the garden and chose the seeds. '.repeat(120)}` } : { toolUse: [{ name: 'memory_save', input: { content: 'The fence is new', memory_type: 'fact' } }] };
      }
      if (isWorkerRequest(request)) return answersTool(request) ? { text: 'Task done.' } : { toolUse: [{ name: 'channel_history', input: { query: 'fence' } }] };
      return answersTool(request) ? { text: 'Tomatoes and beans.' } : { toolUse: [{ name: 'memory_search', input: { query: 'garden' } }] };
    });
    const inner = agents.app.modelFor('channel')!;
    model = {
      model: inner.model,
      async createMessage(request, options) {
        const response = await inner.createMessage(request, options);
        usages.push(response.usage);
        return response;
      },
    };
    await say(agents.app, channel, 30, filler);
  });
  after(() => agents.close());

  async function turn(): Promise<void> {
    await agents.app.runtime.runSerial(channel, () =>
      runAgentTurn({
        runtime: agents.app.runtime,
        channelId: channel,
        model,
        tools: agents.app.tools,
        settings: agents.app.config.settingsFor(channel),
        context: contextFor(channel),
      }),
    );
  }

  /** Accounted usages of the requests matching `kind`, in order (every request here succeeds). */
  function usageOf(kind: (request: RecordedRequest) => boolean): Array<{ request: RecordedRequest; usage: CachedUsage }> {
    assert.equal(cache.log.length, agents.model.requests.length);
    return agents.model.requests.flatMap((request, index) => (kind(request) ? [{ request, usage: cache.log[index]! }] : []));
  }

  it('a channel turn marks its newest turn; its second step reads the first whole; usage is read whole', async () => {
    await turn();
    const [first, second] = usageOf(() => true);
    assert.ok(breakpointsOf(first!.request.body).some((mark) => mark.startsWith(`message:${first!.request.body.messages.length - 1}:`)), 'the newest turn is marked');
    assert.equal(second!.usage.cache_read_input_tokens, whole(first!.usage), 'step 2 reads all of step 1');
    assert.equal(usages[1]!.cacheReadTokens, second!.usage.cache_read_input_tokens, 'the SDK response carries the cache split');
    assert.equal(wholeInputTokens(usages[1]!), whole(second!.usage));
    // Calibration learns from the whole request: with only the uncached part it would fall to its floor.
    assert.ok((await agents.app.runtime.status(channel)).calibration.factor > 0.5, `factor ${(await agents.app.runtime.status(channel)).calibration.factor}`);
  });

  it('the next turn reads up to the end of the previous one, 30 messages later', async () => {
    const before = agents.model.requests.length;
    const previousEnd = whole(cache.log.at(-1)!);
    await say(agents.app, channel, 30, filler, 30);
    clock.now += 2 * MINUTE;
    await turn();
    const next = cache.log[before]!;
    assert.equal(next.cache_read_input_tokens, previousEnd);
    assert.ok(breakpointsOf(agents.model.requests[before]!.body).length <= 4);
  });

  it('after six idle minutes the five-minute cache is cold', async () => {
    const before = agents.model.requests.length;
    clock.now += 6 * MINUTE;
    await say(agents.app, channel, 1, filler, 60);
    await turn();
    assert.equal(cache.log[before]!.cache_read_input_tokens, 0);
  });

  it('the summarizer marks its transcript, and its memory_save step reads it', async () => {
    const before = agents.model.requests.length;
    await agents.app.runtime.compactNow(channel);
    const steps = usageOf(isCompactionRequest).filter(({ request }) => agents.model.requests.indexOf(request) >= before);
    assert.equal(steps.length, 2);
    assert.ok(breakpointsOf(steps[0]!.request.body).length > 0);
    assert.equal(steps[1]!.usage.cache_read_input_tokens, whole(steps[0]!.usage));
  });

  it('a turn after compaction marks the summaries; after a second summary the first is still read', async () => {
    let before = agents.model.requests.length;
    await turn();
    const afterOne = agents.model.requests[before]!;
    assert.match(systemText(afterOne.body), /\[summary of messages/);
    assert.ok(breakpointsOf(afterOne.body).includes(`system:${afterOne.body.system.length - 1}`), `the last summary is marked: ${JSON.stringify(breakpointsOf(afterOne.body))} ${JSON.stringify(afterOne.body.system).slice(0, 300)}`);
    const upToFirstSummary = whole(cache.log[before]!) - cache.log[before]!.input_tokens;
    await say(agents.app, channel, 30, filler, 61);
    await agents.app.runtime.compactNow(channel);
    before = agents.model.requests.length;
    await turn();
    const afterTwo = agents.model.requests[before]!;
    assert.equal(afterTwo.body.system.length, afterOne.body.system.length + 1, 'the new summary is appended as a block of its own');
    assert.deepEqual(afterTwo.body.system.slice(0, -1).map((block: { text: string }) => block.text), afterOne.body.system.map((block: { text: string }) => block.text));
    assert.ok(cache.log[before]!.cache_read_input_tokens > 0 && cache.log[before]!.cache_read_input_tokens <= upToFirstSummary);
  });

  it('a branch marks its fork and its second step reads the first', async () => {
    const before = agents.model.requests.length;
    await agents.tool('branch').run({ question: 'What are we planting?' }, contextFor(channel));
    const steps = usageOf(isBranchRequest).filter(({ request }) => agents.model.requests.indexOf(request) >= before);
    assert.equal(steps.length, 2);
    for (const { request } of steps) assert.ok(breakpointsOf(request.body).length >= 1 && breakpointsOf(request.body).length <= 4);
    assert.equal(steps[1]!.usage.cache_read_input_tokens, whole(steps[0]!.usage));
  });

  it('a worker marks its task and its second step reads the first', async () => {
    const before = agents.model.requests.length;
    const posted: string[] = [];
    const outcome = await agents.tool('spawn_worker').run({ task: 'Find what was said about the fence. '.repeat(100) }, contextFor(channel, { postToChannel: async (text) => (posted.push(text), `p${posted.length}`) }));
    assert.equal(outcome.isError, false, outcome.content);
    await waitFor(() => posted.length > 0, 'the worker report');
    const steps = usageOf(isWorkerRequest).filter(({ request }) => agents.model.requests.indexOf(request) >= before);
    assert.equal(steps.length, 2);
    assert.ok(breakpointsOf(steps[0]!.request.body).length >= 1);
    assert.equal(steps[1]!.usage.cache_read_input_tokens, whole(steps[0]!.usage));
  });

  it('with budget_unit "billed", a turn spends its billed-equivalent tokens', async () => {
    await say(agents.app, channel, 5, filler, 200);
    const settings = { ...agents.app.config.settingsFor(channel), budgetUnit: 'billed' as const };
    const result = await agents.app.runtime.runSerial(channel, () =>
      runAgentTurn({ runtime: agents.app.runtime, channelId: channel, model, tools: agents.app.tools, settings, context: contextFor(channel) }),
    );
    assert.ok((result.usage.cacheReadTokens ?? 0) > 0);
    assert.equal(result.spentTokens, budgetTokens(result.usage, 'billed'));
    assert.ok(result.spentTokens < wholeInputTokens(result.usage) / 2, `${result.spentTokens} billed of ${wholeInputTokens(result.usage)}`);
  });

  it('no request carried more than four breakpoints, and none was refused', () => {
    for (const request of agents.model.requests) assert.ok(breakpointsOf(request.body).length <= 4);
    assert.equal(cache.log.length, agents.model.requests.length);
  });
});
