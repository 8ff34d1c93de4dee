import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULTS } from '../src/config/defaults.js';
import { createChannelHistoryTool, taskStatement, WorkerStore } from '../src/worker/index.js';
import {
  contextFor,
  isCompactionRequest,
  isWorkerRequest,
  say,
  startAgents,
  toolPairingProblems,
  waitFor,
} from './branch-worker-support.js';
import type { RecordedRequest } from './fakes/fake-anthropic.js';

const workerDefaults = DEFAULTS.defaults.worker;

function toolResultsOf(request: RecordedRequest): string[] {
  const last = request.body.messages.at(-1) as { content: Array<{ type: string; content?: string }> };
  return last.content.filter((block) => block.type === 'tool_result').map((block) => block.content ?? '');
}

function spawn(agents: Awaited<ReturnType<typeof startAgents>>, channel: string, task: string, posted: string[]) {
  return agents.tool('spawn_worker').run(
    { task },
    contextFor(channel, {
      postToChannel: async (text) => {
        posted.push(text);
        return `posted-${posted.length}`;
      },
    }),
  );
}

test('a worker of 60 turns compacts between segments, keeps its task statement, never splits a call from its result', async () => {
  // A window that holds a whole segment of 25 turns (a real API refuses more), and a threshold that a segment passes.
  const agents = await startAgents({ defaults: { contextWindow: 40000, maxResponseTokens: 256, worker: { ...DEFAULTS.defaults.worker, compactThreshold: 0.3 } } });
  try {
    const channel = 'long-task';
    await say(agents.app, channel, 20, (index) => `note ${index}: ${'the garden plan needs tomatoes, beans and a new fence. '.repeat(4)}`);
    let workerCalls = 0;
    agents.model.setDefault((request) => {
      if (!isWorkerRequest(request)) return { status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } };
      workerCalls += 1;
      if (workerCalls < 60) return { toolUse: [{ name: 'channel_history', input: { limit: 5, before: new Date(Date.UTC(2024, 0, 1) + (20 - (workerCalls % 15)) * 60_000).toISOString() } }] };
      return { text: 'Finished: the garden needs tomatoes, beans and a fence.' };
    });
    const posted: string[] = [];
    const task = 'List everything the channel said about the garden.';
    const started = await spawn(agents, channel, task, posted);
    assert.equal(started.isError, false);
    const { worker_id: workerId, status } = JSON.parse(started.content) as { worker_id: string; status: string };
    assert.equal(status, 'started');
    assert.match(workerId, /^w-[0-9a-f]{8}$/);
    await agents.app.workers.idle();

    const requests = agents.model.requests.filter(isWorkerRequest);
    assert.equal(requests.length, 60);
    for (const request of requests) {
      const first = request.body.messages[0] as { role: string; content: Array<{ type: string; text: string }> };
      assert.equal(first.role, 'user');
      assert.equal(first.content[0]!.text, taskStatement(task), `request ${request.index} still opens with the task statement`);
      assert.deepEqual(toolPairingProblems(request.body.messages), [], `request ${request.index}`);
      assert.deepEqual(request.body.tools.map((tool: { name: string }) => tool.name).sort(), ['channel_history', 'memory_save', 'memory_search']);
    }
    // Segment boundaries: 25 turns, then a trim, so the 26th request is shorter than the 25th.
    assert.ok(requests[25]!.body.messages.length < requests[24]!.body.messages.length);
    assert.ok(requests[50]!.body.messages.length < requests[49]!.body.messages.length);
    const compacted = agents.events.filter((event) => event.type === 'worker_compacted');
    assert.deepEqual(compacted.map((event) => event.segment), [2, 3]);
    for (const event of compacted) {
      assert.equal(event.channel_id, channel);
      assert.ok((event.after_tokens as number) < (event.before_tokens as number));
      assert.ok((event.dropped_calls as number) > 0);
    }
    assert.deepEqual(agents.events.filter((event) => event.type === 'worker_segment').map((event) => event.segment), [1, 2, 3]);
    const completed = agents.events.find((event) => event.type === 'worker_completed')!;
    assert.equal(completed.status, 'completed');
    assert.equal(completed.turns, 60);
    assert.ok((completed.input_tokens as number) > 0);

    assert.equal(posted.length, 1);
    assert.match(posted[0]!, new RegExp(`^\\[worker ${workerId} report\\]`));
    assert.match(posted[0]!, /Finished: the garden needs tomatoes/);
    const last = (await agents.app.runtime.liveContext(channel)).entries.at(-1)!;
    assert.equal(last.content, posted[0]);
    assert.equal(last.messageId, 'posted-1', 'history knows the report by the id it was posted under');
    assert.equal((await new WorkerStore(agents.app.db).get(workerId))!.status, 'completed');
  } finally {
    await agents.close();
  }
});

test('a worker finds, through channel_history and memory_search, a fact compacted out of the channel long before', async () => {
  const agents = await startAgents();
  try {
    const channel = 'forgetful';
    await agents.app.runtime.ingest({
      messageId: 'fact-1',
      channelId: channel,
      authorId: 'u-dana',
      authorName: 'Dana',
      role: 'user',
      content: 'the storage unit code is 7731, do not lose it',
      createdAt: Date.UTC(2023, 5, 1),
    });
    await say(agents.app, channel, 30, (index) => `chatter ${index} about lunch and the weather`);
    agents.model.setDefault((request) => (isCompactionRequest(request) ? { text: 'The group chatted about lunch and the weather.' } : { status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } }));
    const outcome = (await agents.app.runtime.compactNow(channel)) as { status: string };
    assert.equal(outcome.status, 'completed');
    const live = await agents.app.runtime.liveContext(channel);
    assert.ok(!live.entries.some((entry) => entry.content.includes('7731')), 'the fact left the live context');
    assert.ok(!live.summaries.some((summary) => summary.content.includes('7731')), 'and the summary does not carry it');

    agents.model.reset();
    agents.model.enqueue(
      { toolUse: [{ name: 'channel_history', input: { query: 'storage code', limit: 10 } }] },
      { toolUse: [{ name: 'memory_search', input: { query: 'storage unit code' } }] },
      (request) => {
        const [found] = toolResultsOf(request);
        const hit = (JSON.parse(found!) as Array<{ message_id: string; author: string; content: string }>)[0]!;
        return { text: `${hit.author} said "${hit.content}" (message ${hit.message_id}).` };
      },
    );
    const posted: string[] = [];
    assert.equal((await spawn(agents, channel, 'Find the storage unit code someone shared.', posted)).isError, false);
    await agents.app.workers.idle();

    const [historyCall, searchCall] = [agents.model.requests[1]!, agents.model.requests[2]!];
    const history = JSON.parse(toolResultsOf(historyCall)[0]!) as Array<{ message_id: string; author: string; content: string; created_at: string; neighbors: Array<{ position: string; message_id: string }> }>;
    assert.deepEqual(history.map((message) => message.message_id), ['fact-1']);
    assert.equal(history[0]!.author, 'Dana');
    assert.equal(history[0]!.created_at, new Date(Date.UTC(2023, 5, 1)).toISOString());
    assert.deepEqual(history[0]!.neighbors.map((item) => [item.position, item.message_id]), [['after', `${channel}-m0`]]);
    const search = JSON.parse(toolResultsOf(searchCall)[0]!) as Array<{ kind: string; message_id?: string; author?: string; content: string }>;
    const hit = search.find((result) => result.message_id === 'fact-1');
    assert.ok(hit, 'memory_search names the matched message');
    assert.equal(hit.author, 'Dana');
    assert.match(hit.content, /7731/);
    assert.equal(posted.length, 1);
    // The report was built from the memory_search hit, which names its author and message.
    assert.match(posted[0]!, /Dana said "Dana: the storage unit code is 7731, do not lose it" \(message fact-1\)/);
  } finally {
    await agents.close();
  }
});

test('channel_history: newest first, scoped to its channel, filtered by time and words; bad input is a tool error', async () => {
  const agents = await startAgents();
  try {
    await say(agents.app, 'here', 6, (index) => (index === 2 ? 'the Blue door is 50% open_now' : `plain message ${index}`));
    await say(agents.app, 'there', 3, (index) => `secret of another channel ${index}`);
    const tool = createChannelHistoryTool(agents.app.db);
    const read = async (input: unknown) => {
      const outcome = await tool.run(input, { channelId: 'here' });
      assert.equal(outcome.isError, false, outcome.content);
      return JSON.parse(outcome.content) as Array<{ message_id: string; content: string; created_at: string }>;
    };
    assert.deepEqual((await read({})).map((message) => message.message_id), ['here-m5', 'here-m4', 'here-m3', 'here-m2', 'here-m1', 'here-m0']);
    assert.deepEqual((await read({ limit: 2 })).map((message) => message.message_id), ['here-m5', 'here-m4']);
    const at = (index: number) => new Date(Date.UTC(2024, 0, 1) + index * 60_000).toISOString();
    assert.deepEqual((await read({ after: at(1), before: at(4) })).map((message) => message.message_id), ['here-m3', 'here-m2']);
    assert.deepEqual((await read({ query: 'blue DOOR' })).map((message) => message.message_id), ['here-m2']);
    // LIKE wildcards in a query are literal text.
    assert.deepEqual((await read({ query: '50%' })).map((message) => message.message_id), ['here-m2']);
    assert.deepEqual((await read({ query: 'open_now' })).map((message) => message.message_id), ['here-m2']);
    assert.deepEqual(await read({ query: 'secret' }), [], 'another channel is never read');

    const cases: Array<[unknown, RegExp]> = [
      [{ limit: 51 }, /limit must be between 1 and 50/],
      [{ limit: 0 }, /limit must be between 1 and 50/],
      [{ limit: 2.5 }, /limit must be an integer/],
      [{ before: 'last tuesday' }, /before is not a time/],
      [{ after: '' }, /after must be a time in ISO 8601/],
      [{ after: at(4), before: at(1) }, /after must be earlier than before/],
      [{ query: 5 }, /query must be a string/],
      [{ channel: 'there' }, /unknown field channel/],
      ['everything', /JSON object/],
    ];
    for (const [input, expected] of cases) {
      const outcome = await tool.run(input, { channelId: 'here' });
      assert.equal(outcome.isError, true, JSON.stringify(input));
      assert.match(outcome.content, expected);
    }
  } finally {
    await agents.close();
  }
});

test('worker limits: max_concurrent per channel, bad task input, a timeout and max_segments each report back', async () => {
  const agents = await startAgents({
    defaults: { worker: { ...workerDefaults, maxConcurrent: 1, turnsPerSegment: 2, maxSegments: 2, timeoutMs: 60_000 } },
  });
  try {
    agents.model.setDefault((request) =>
      isWorkerRequest(request) ? { toolUse: [{ name: 'memory_search', input: { query: 'anything' } }] } : { status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } },
    );
    const posted: string[] = [];
    const first = await spawn(agents, 'busy', 'Search forever.', posted);
    assert.equal(first.isError, false);
    const second = await spawn(agents, 'busy', 'Another task.', posted);
    assert.equal(second.isError, true);
    assert.match(second.content, /^worker not started: 1 worker is already running in this channel/);
    await agents.app.workers.idle();
    assert.equal(posted.length, 1);
    assert.match(posted[0]!, /reached its limit of 2 segments/);
    assert.equal(agents.model.requests.filter(isWorkerRequest).length, 4, '2 segments of 2 turns');

    for (const [input, expected] of [
      [{}, /task must be a string/],
      [{ task: '  ' }, /task is empty/],
      [{ task: 'x'.repeat(4001) }, /at most 4000/],
      [{ task: 'ok', priority: 'high' }, /unknown field priority/],
      [42, /JSON object/],
    ] as Array<[unknown, RegExp]>) {
      const outcome = await agents.tool('spawn_worker').run(input, contextFor('busy'));
      assert.equal(outcome.isError, true);
      assert.match(outcome.content, expected);
    }
  } finally {
    await agents.close();
  }

  const slow = await startAgents({ defaults: { worker: { ...workerDefaults, timeoutMs: 300 } } });
  try {
    slow.model.setDefault({ delayMs: 10_000, then: { text: 'too late' } });
    const posted: string[] = [];
    assert.equal((await spawn(slow, 'slow', 'Take your time.', posted)).isError, false);
    await slow.app.workers.idle();
    assert.equal(posted.length, 1);
    assert.match(posted[0]!, /timed out/);
    assert.equal(slow.events.find((event) => event.type === 'worker_failed')!.reason, 'timed_out');
  } finally {
    await slow.close();
  }
});

test('a worker running when the process stops is reported as interrupted at the next start, once', async () => {
  const agents = await startAgents();
  try {
    agents.model.setDefault({ delayMs: 30_000, then: { text: 'never delivered' } });
    await say(agents.app, 'restart', 2, (index) => `before the restart ${index}`);
    const posted: string[] = [];
    const started = JSON.parse((await spawn(agents, 'restart', 'Summarize the week.', posted)).content) as { worker_id: string };
    await waitFor(() => agents.model.inFlight > 0, 'the worker to call the model');
    const entriesBefore = (await agents.app.runtime.liveContext('restart')).entries.length;

    await agents.restart();

    assert.deepEqual(posted, [], 'nothing was posted for a worker that did not finish');
    const entries = (await agents.app.runtime.liveContext('restart')).entries;
    assert.equal(entries.length, entriesBefore + 1);
    assert.match(entries.at(-1)!.content, new RegExp(`^\\[worker ${started.worker_id} interrupted\\]`));
    assert.match(entries.at(-1)!.content, /Summarize the week/);
    const failed = agents.events.find((event) => event.type === 'worker_failed')!;
    assert.equal(failed.reason, 'interrupted');
    assert.equal(failed.channel_id, 'restart');
    assert.equal((await new WorkerStore(agents.app.db).get(started.worker_id))!.status, 'interrupted');

    await agents.restart();
    assert.equal((await agents.app.runtime.liveContext('restart')).entries.length, entriesBefore + 1, 'reported once');
  } finally {
    await agents.close();
  }
});

test('a cancelled worker reports it stopped and leaves history valid', async () => {
  const agents = await startAgents();
  try {
    agents.model.setDefault({ delayMs: 30_000, then: { text: 'never' } });
    const posted: string[] = [];
    const { worker_id: workerId } = JSON.parse((await spawn(agents, 'cancel-me', 'Count the stars.', posted)).content) as { worker_id: string };
    assert.deepEqual((await agents.app.workers.list('cancel-me')).map((worker) => worker.id), [workerId]);
    assert.deepEqual(await agents.app.workers.list('other'), []);
    assert.equal(agents.app.workers.cancel('other', workerId), false, 'not from another channel');
    assert.equal(agents.app.workers.cancel('cancel-me', workerId, 'mod'), true);
    await agents.app.workers.idle();
    assert.equal(posted.length, 1);
    assert.match(posted[0]!, new RegExp(`\\[worker ${workerId} cancelled\\] Task “Count the stars.” was cancelled by mod`));
    assert.deepEqual(await agents.app.workers.list('cancel-me'), []);
    assert.equal(agents.app.workers.cancel('cancel-me', workerId), false, 'already gone');
  } finally {
    await agents.close();
  }
});

test('a deleted message quoted in a worker\'s task leaves the task: its row, the running list and the report', async () => {
  const agents = await startAgents();
  try {
    const channel = 'quoted-task';
    const secret = 'the alarm code for the shed is 5519';
    await agents.app.runtime.ingest({ messageId: 'secret-1', channelId: channel, authorId: 'u-dana', authorName: 'Dana', role: 'user', content: secret, createdAt: Date.UTC(2024, 0, 1) });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    agents.model.setDefault(async (request) => {
      if (!isWorkerRequest(request)) return { status: 500, message: 'unscripted', headers: { 'x-should-retry': 'false' } };
      await held;
      return { text: 'Checked.' };
    });
    const posted: string[] = [];
    const quoting = JSON.parse((await spawn(agents, channel, `Check whether "${secret}" still opens the shed.`, posted)).content) as { worker_id: string };
    const unrelated = JSON.parse((await spawn(agents, 'elsewhere', 'Count the garden chairs.', [])).content) as { worker_id: string };
    const since = agents.events.length;
    assert.equal(await agents.app.runtime.deleteMessages(channel, ['secret-1']), 1);

    const store = new WorkerStore(agents.app.db);
    assert.equal((await store.get(quoting.worker_id))!.task, 'Check whether "[deleted message]" still opens the shed.');
    assert.equal((await store.get(unrelated.worker_id))!.task, 'Count the garden chairs.', 'a task that quoted nothing is left alone');
    assert.deepEqual((await agents.app.workers.list(channel)).map((worker) => worker.task), ['Check whether "[deleted message]" still opens the shed.']);
    const propagated = agents.events.slice(since).find((event) => event.type === 'deletion_propagated')!;
    assert.equal(propagated.worker_tasks_redacted, 1);

    release();
    await agents.app.workers.idle();
    assert.equal(posted.length, 1);
    assert.doesNotMatch(posted[0]!, /5519/, 'the report quotes the task as it is now');
    assert.match(posted[0]!, /Task “Check whether "\[deleted message\]" still opens the shed\.”/);
  } finally {
    await agents.close();
  }
});

test('branches and workers share the model concurrency cap with the channel', async () => {
  const agents = await startAgents({ llm: { maxConcurrentCalls: 1 } });
  try {
    agents.model.setDefault({ delayMs: 50, then: { text: 'done' } });
    const posted: string[] = [];
    await say(agents.app, 'cap-a', 1, () => 'hello');
    await spawn(agents, 'cap-a', 'Task one.', posted);
    await spawn(agents, 'cap-b', 'Task two.', posted);
    const branch = await agents.tool('branch').run({ question: 'anything?' }, contextFor('cap-a'));
    await agents.app.workers.idle();
    assert.deepEqual(branch, { isError: false, content: 'done' });
    assert.equal(posted.length, 2);
    assert.equal(agents.model.requests.length, 3);
    assert.equal(agents.model.maxInFlight, 1, 'never more than [llm] max_concurrent_calls at once');
  } finally {
    await agents.close();
  }
});

test('a thread without settings of its own follows its parent channel\'s worker limit', async () => {
  const agents = await startAgents({
    channels: { parent: { worker: { ...workerDefaults, maxConcurrent: 1 } } },
  });
  try {
    agents.model.setDefault({ delayMs: 30_000, then: { text: 'never' } });
    const inThread = { channelId: 'thread-1', parentChannelId: 'parent' };
    assert.equal((await agents.tool('spawn_worker').run({ task: 'one' }, inThread)).isError, false);
    const second = await agents.tool('spawn_worker').run({ task: 'two' }, inThread);
    assert.match(second.content, /1 worker is already running/);
    // Elsewhere the default of 2 applies.
    assert.equal((await agents.tool('spawn_worker').run({ task: 'one' }, { channelId: 'other' })).isError, false);
    assert.equal((await agents.tool('spawn_worker').run({ task: 'two' }, { channelId: 'other' })).isError, false);
  } finally {
    await agents.close();
  }
});
