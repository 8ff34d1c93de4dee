import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BRANCH_CONTINUE_NOTE, BRANCH_QUESTION_PREFIX } from '../src/branch/index.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { lastUserText } from './discord-helpers.js';
import {
  contextFor,
  isBranchRequest,
  isCompactionRequest,
  requestTokens,
  say,
  startAgents,
  toolPairingProblems,
  waitFor,
  type AgentsHarness,
} from './branch-worker-support.js';
import type { FakeReply } from './fakes/fake-anthropic.js';
import { systemText } from './fakes/fake-prompt-cache.js';

const WINDOW = 8000;
const RESPONSE = 512;
const TOO_LONG = 'prompt is too long: 212044 tokens > 200000 maximum';

function filler(index: number): string {
  return `message ${index}: ${'we talked about the garden, the weather and the plans for the week ahead. '.repeat(5)}`;
}

describe('branch', () => {
  let agents: AgentsHarness;
  const channel = 'branch-channel';
  before(async () => {
    agents = await startAgents({ defaults: { contextWindow: WINDOW, maxResponseTokens: RESPONSE } });
    agents.model.setDefault((request) => (isCompactionRequest(request) ? { text: 'They chatted.' } : { status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } }));
    await say(agents.app, channel, 1, () => 'Ana: the release moves to Friday the 14th, decided by Ben');
    await say(agents.app, channel, 44, filler, 1);
  });
  after(() => agents.close());

  test('a fork over precompact_threshold is compacted before its first call, without a model call', async () => {
    const threshold = DEFAULTS.defaults.branch.precompactThreshold * (WINDOW - RESPONSE);
    const live = await agents.app.runtime.liveContext(channel);
    assert.ok(live.estimatedTokens > threshold, `the channel's live context (${live.estimatedTokens}) is over ${threshold}`);
    assert.equal(agents.events.filter((event) => event.type === 'compaction_triggered').length, 0, 'the channel itself did not compact');
    agents.model.reset();
    agents.model.setDefault({ status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } });
    agents.model.enqueue({ text: 'The release is on Friday the 14th (Ben decided).' });

    const outcome = await agents.tool('branch').run({ question: 'When is the release?' }, contextFor(channel));

    assert.deepEqual(outcome, { isError: false, content: 'The release is on Friday the 14th (Ben decided).' });
    assert.equal(agents.model.requests.length, 1, 'one call: compaction needed no model');
    const [request] = agents.model.requests;
    assert.ok(isBranchRequest(request!));
    assert.ok(requestTokens(request!) < threshold, `the request sent (${requestTokens(request!)} tokens) is under ${threshold}`);
    assert.match(systemText(request!.body), /older messages of this channel were set aside/);
    assert.ok(lastUserText(request!.body).endsWith(`${BRANCH_QUESTION_PREFIX}When is the release?`), 'the question is the last user text');
    assert.deepEqual(request!.body.tools.map((tool: { name: string }) => tool.name).sort(), ['memory_save', 'memory_search']);
    const started = agents.events.findLast((event) => event.type === 'branch_started')!;
    assert.equal(started.channel_id, channel);
    assert.ok((started.set_aside_entries as number) > 0);
    const completed = agents.events.findLast((event) => event.type === 'branch_completed')!;
    assert.equal(completed.status, 'answered');
    assert.equal(completed.channel_id, channel);
    assert.equal(completed.overflow_retries, 0);
    // The channel's own context is untouched by the branch.
    assert.equal((await agents.app.runtime.liveContext(channel)).entries.length, live.entries.length);
  });

  test('two overflow errors: compacts harder each time, keeps its work, and answers', async () => {
    agents.model.reset();
    agents.model.enqueue(
      { toolUse: [{ name: 'memory_search', input: { query: 'release date' } }], text: 'Looking it up.' },
      { status: 400, message: TOO_LONG },
      { status: 400, message: TOO_LONG },
      { text: 'Friday the 14th.' },
    );
    const outcome = await agents.tool('branch').run({ question: 'When is the release?' }, contextFor(channel));
    assert.deepEqual(outcome, { isError: false, content: 'Friday the 14th.' });
    const requests = agents.model.requests;
    assert.equal(requests.length, 4);
    assert.ok(requestTokens(requests[2]!) < requestTokens(requests[1]!), 'first retry sends less');
    assert.ok(requestTokens(requests[3]!) < requestTokens(requests[2]!), 'second retry sends less again');
    for (const retry of [requests[2]!, requests[3]!]) {
      assert.ok(lastUserText(retry.body).includes(BRANCH_CONTINUE_NOTE), 'a retry says the context was compacted');
      assert.equal(lastUserText(retry.body).split(BRANCH_CONTINUE_NOTE).length, 2, 'once');
      assert.ok(JSON.stringify(retry.body.messages).includes('release date'), 'the search done before the overflow is kept');
      assert.deepEqual(toolPairingProblems(retry.body.messages), []);
    }
    const completed = agents.events.findLast((event) => event.type === 'branch_completed')!;
    assert.equal(completed.status, 'answered');
    assert.equal(completed.overflow_retries, 2);
  });

  test('a third overflow gives up gracefully with the best answer and a note', async () => {
    agents.model.reset();
    agents.model.enqueue(
      { toolUse: [{ name: 'memory_search', input: { query: 'release' } }], text: 'So far it looks like Friday.' },
      { status: 400, message: TOO_LONG },
      { status: 400, message: TOO_LONG },
      { status: 400, message: TOO_LONG },
      { text: 'never asked for' },
    );
    const outcome = await agents.tool('branch').run({ question: 'When is the release?' }, contextFor(channel));
    assert.equal(outcome.isError, false);
    assert.match(outcome.content, /^So far it looks like Friday\./);
    assert.match(outcome.content, /ran out of room/);
    assert.equal(agents.model.requests.length, 4, 'initial call plus max_overflow_retries (2) retries, no more');
    assert.equal(agents.model.pending, 1);
    assert.equal(agents.events.findLast((event) => event.type === 'branch_completed')!.status, 'out_of_room');
  });

  test('a 400 that is not an overflow is not retried: a readable tool error', async () => {
    agents.model.reset();
    agents.model.enqueue({ status: 400, message: 'messages: roles must alternate between "user" and "assistant"' });
    const outcome = await agents.tool('branch').run({ question: 'When is the release?' }, contextFor(channel));
    assert.equal(outcome.isError, true);
    assert.match(outcome.content, /^branch failed: model call failed with HTTP 400/);
    assert.equal(agents.model.requests.length, 1);
  });

  test('bad input is a tool error naming what is wrong', async () => {
    const branch = agents.tool('branch');
    const cases: Array<[unknown, RegExp]> = [
      [{}, /question must be a string/],
      [{ question: '   ' }, /question is empty/],
      [{ question: 7 }, /question must be a string/],
      [{ question: 'x'.repeat(4001) }, /at most 4000/],
      [{ question: 'ok', depth: 3 }, /unknown field depth/],
      [['question'], /JSON object/],
      [null, /JSON object/],
    ];
    agents.model.reset();
    for (const [input, expected] of cases) {
      const outcome = await branch.run(input, contextFor(channel));
      assert.equal(outcome.isError, true, JSON.stringify(input));
      assert.match(outcome.content, expected);
    }
    assert.equal(agents.model.requests.length, 0);
  });
});

describe('branch limits', () => {
  test('max_concurrent branches per channel, the daily budget, and a timeout that still answers', async () => {
    const agents = await startAgents({
      defaults: { dailyTokenBudget: 5_000, branch: { ...DEFAULTS.defaults.branch, maxConcurrent: 1, timeoutMs: 60_000 } },
    });
    try {
      await say(agents.app, 'limits', 2, (index) => `hello ${index}`);
      // The first branch's answer is held until the checks below are done.
      let release: (() => void) | undefined;
      agents.model.enqueue(
        () =>
          new Promise<FakeReply>((resolve) => {
            release = () => resolve({ text: 'first done', usage: { inputTokens: 10, outputTokens: 5 } });
          }),
      );
      const first = agents.tool('branch').run({ question: 'one?' }, contextFor('limits'));
      await waitFor(() => release !== undefined, 'the first branch to call the model');
      const second = await agents.tool('branch').run({ question: 'two?' }, contextFor('limits'));
      assert.equal(second.isError, true);
      assert.match(second.content, /1 branch is already running in this channel/);
      // Another channel has its own limit.
      agents.model.enqueue({ text: 'other channel', usage: { inputTokens: 10, outputTokens: 5 } });
      await say(agents.app, 'elsewhere', 1, () => 'hi');
      assert.deepEqual(await agents.tool('branch').run({ question: 'three?' }, contextFor('elsewhere')), { isError: false, content: 'other channel' });
      release!();
      assert.deepEqual(await first, { isError: false, content: 'first done' });

      // Branch tokens count against the channel's daily budget.
      agents.model.enqueue({ text: 'expensive', usage: { inputTokens: 6_000, outputTokens: 10 } });
      assert.equal((await agents.tool('branch').run({ question: 'four?' }, contextFor('limits'))).content, 'expensive');
      const refused = await agents.tool('branch').run({ question: 'five?' }, contextFor('limits'));
      assert.equal(refused.isError, true);
      assert.match(refused.content, /used up its model budget/);
    } finally {
      await agents.close();
    }
  });

  test('a branch out of time answers with what it has, never an exception', async () => {
    const agents = await startAgents({ defaults: { branch: { ...DEFAULTS.defaults.branch, timeoutMs: 3_000 } } });
    try {
      await say(agents.app, 'slow', 1, () => 'hello');
      agents.model.enqueue(
        { toolUse: [{ name: 'memory_search', input: { query: 'hello' } }], text: 'Halfway there.' },
        { delayMs: 60_000, then: { text: 'too late' } },
      );
      const outcome = await agents.tool('branch').run({ question: 'anything?' }, contextFor('slow'));
      assert.equal(outcome.isError, false);
      assert.match(outcome.content, /^Halfway there\./);
      assert.match(outcome.content, /ran out of time/);
    } finally {
      await agents.close();
    }
  });
});

test('the pre-flight check counts real tokens: a channel calibrated at 2 real tokens per estimated one compacts sooner', async () => {
  const agents = await startAgents({ defaults: { contextWindow: WINDOW, maxResponseTokens: RESPONSE } });
  try {
    const threshold = DEFAULTS.defaults.branch.precompactThreshold * (WINDOW - RESPONSE);
    for (const channel of ['plain', 'dense']) await say(agents.app, channel, 28, filler);
    // About 45% of the window by the estimate: under the threshold until calibration says otherwise.
    assert.ok((await agents.app.runtime.liveContext('dense')).estimatedTokens < threshold);
    await agents.app.runtime.recordUsage('dense', 1_000, 2_000);
    // The fixed part (prompt, tools) is counted apart, so the messages carry the rest of the 2×.
    assert.ok((await agents.app.runtime.requestEstimate('dense')).factor >= 2);
    agents.model.setDefault({ text: 'ok' });

    for (const channel of ['plain', 'dense']) await agents.tool('branch').run({ question: 'anything?' }, contextFor(channel));
    const started = agents.events.filter((event) => event.type === 'branch_started');
    assert.equal(started[0]!.set_aside_entries, 0, 'uncalibrated: the fork fits as it is');
    assert.ok((started[1]!.set_aside_entries as number) > 0, 'calibrated at 2: set aside first');
    const dense = agents.model.requests[1]!;
    assert.ok(2 * requestTokens(dense) < threshold, `real size of the request (${2 * requestTokens(dense)}) under ${threshold}`);
  } finally {
    await agents.close();
  }
});
