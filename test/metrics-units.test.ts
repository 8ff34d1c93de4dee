import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { EventStream } from '../src/common/events.js';
import { needsRestart } from '../src/config/diff-config.js';
import { checkConfigText, parseConfigText } from '../src/config/index.js';
import type { ChatModel } from '../src/llm/chat-model.js';
import { observeModel } from '../src/llm/observed-model.js';
import { attachEventMetrics, databaseProblem, MagpieMetrics, openOperatorEndpoint, Readiness, shardListen } from '../src/metrics/index.js';
import { parseMetrics, sampleValue } from './support/prometheus-text.js';

test('[metrics] listen takes "host:port" or "" and names the key when it is wrong', () => {
  assert.equal(parseConfigText('').metrics.listen, '127.0.0.1:9464');
  assert.equal(parseConfigText('[metrics]\nlisten = ""\n').metrics.listen, '');
  assert.equal(parseConfigText('[metrics]\nlisten = "[::1]:9464"\n').metrics.listen, '[::1]:9464');
  assert.equal(parseConfigText('[metrics]\nlisten = "0.0.0.0:0"\n').metrics.listen, '0.0.0.0:0');
  const bad: Array<[string, RegExp]> = [
    ['9464', /must be "host:port" \(or "" for off\), got an integer/],
    ['"9464"', /must be "host:port" such as "127\.0\.0\.1:9464"/],
    ['"localhost"', /must be "host:port"/],
    ['"127.0.0.1:70000"', /port must be between 0 and 65535, got 70000/],
    ['"http://127.0.0.1:9464"', /must be "host:port"/],
    ['["127.0.0.1:9464"]', /got a list/],
  ];
  for (const [value, pattern] of bad) {
    const result = checkConfigText(`[metrics]\nlisten = ${value}\n`);
    assert.equal(result.ok, false, value);
    if (result.ok) continue;
    assert.equal(result.problems[0]!.path, 'metrics.listen', value);
    assert.match(result.problems[0]!.message, pattern, value);
  }
  assert.ok(needsRestart('metrics.listen'), 'a reload says the listener waits for a restart');
  const typo = checkConfigText('[metrics]\nlistn = "127.0.0.1:1"\n');
  assert.equal(typo.ok, false);
  if (!typo.ok) assert.match(typo.problems[0]!.message, /did you mean `listen`/);
});

test('shard K serves metrics on [metrics] listen port + K; off and any-free-port stay as they are', () => {
  assert.equal(shardListen('127.0.0.1:9464', 0), '127.0.0.1:9464');
  assert.equal(shardListen('127.0.0.1:9464', 3), '127.0.0.1:9467');
  assert.equal(shardListen('[::1]:9464', 1), '[::1]:9465');
  assert.equal(shardListen('0.0.0.0:0', 5), '0.0.0.0:0');
  assert.equal(shardListen('', 2), '');
  assert.equal(shardListen('127.0.0.1:65534', 1), '127.0.0.1:65535');
  assert.throws(() => shardListen('127.0.0.1:65535', 1), /shard 1 would serve metrics on port 65536, above 65535/);
});

test('each MagpieMetrics has its own registry, so two apps in one process count apart', async () => {
  const first = new MagpieMetrics({ defaultMetrics: false });
  const second = new MagpieMetrics({ defaultMetrics: false });
  first.messagesIngested.inc(3);
  assert.equal(sampleValue(parseMetrics(await first.text()), 'magpie_messages_ingested_total'), 3);
  assert.equal(sampleValue(parseMetrics(await second.text()), 'magpie_messages_ingested_total'), 0);
});

test('events become counters with tier and outcome labels, never ids', async () => {
  const metrics = new MagpieMetrics({ defaultMetrics: false });
  const events = new EventStream();
  const detach = attachEventMetrics(events, metrics);
  events.emit({ type: 'compaction_completed', channel_id: 'c1', compaction_id: 'x', tier: 'manual', tokens_freed: 1200, duration_ms: 1500 });
  events.emit({ type: 'compaction_completed', channel_id: 'c1', compaction_id: 'y', tier: 'background', tokens_freed: -40, duration_ms: 20 });
  events.emit({ type: 'compaction_failed', channel_id: 'c2', compaction_id: 'z', tier: 'aggressive', duration_ms: 'garbage' });
  events.emit({ type: 'compaction_replanned', channel_id: 'c2', compaction_id: 'w', tier: 'background' });
  events.emit({ type: 'emergency_truncation', channel_id: 'c3', tokens_freed: 5000 });
  events.emit({ type: 'agent_turn_completed', channel_id: 'c1', duration_ms: 2500 });
  events.emit({ type: 'agent_turn_failed', channel_id: 'c1', duration_ms: 100 });
  events.emit({ type: 'turn_rate_limited', channel_id: 'c1', user_id: 'u1' });
  events.emit({ type: 'turn_over_budget', channel_id: 'c1' });
  events.emit({ type: 'something_else', channel_id: 'c1' });
  detach();
  events.emit({ type: 'emergency_truncation', channel_id: 'c3' });
  const text = await metrics.text();
  const samples = parseMetrics(text);
  assert.equal(sampleValue(samples, 'magpie_compactions_total', { tier: 'manual', outcome: 'completed' }), 1);
  assert.equal(sampleValue(samples, 'magpie_compactions_total', { tier: 'background', outcome: 'completed' }), 1);
  assert.equal(sampleValue(samples, 'magpie_compactions_total', { tier: 'aggressive', outcome: 'failed' }), 1);
  assert.equal(sampleValue(samples, 'magpie_compactions_total', { tier: 'background', outcome: 'replanned' }), 1);
  assert.equal(sampleValue(samples, 'magpie_emergency_truncations_total'), 1, 'counted once: detached after');
  assert.equal(sampleValue(samples, 'magpie_compaction_freed_tokens_sum'), 1200, 'a negative freeing counts as 0');
  assert.equal(sampleValue(samples, 'magpie_compaction_freed_tokens_count'), 2);
  assert.equal(sampleValue(samples, 'magpie_compaction_duration_seconds_sum', { tier: 'manual' }), 1.5);
  assert.equal(sampleValue(samples, 'magpie_compaction_duration_seconds_count', { tier: 'aggressive' }), undefined, 'a garbage duration is not observed');
  for (const outcome of ['completed', 'failed', 'rate_limited', 'over_budget']) {
    assert.equal(sampleValue(samples, 'magpie_turns_total', { outcome }), 1, outcome);
  }
  assert.equal(sampleValue(samples, 'magpie_turn_duration_seconds_sum'), 2.6);
  assert.doesNotMatch(text, /c1|c2|c3|u1|channel_id|user_id/);
});

test('observeModel counts calls and tokens by purpose; a failed call is counted and still fails', async () => {
  const metrics = new MagpieMetrics({ defaultMetrics: false });
  let fail = false;
  const model: ChatModel = {
    model: 'fake',
    async createMessage() {
      if (fail) throw new Error('overloaded');
      return { content: [{ type: 'text', text: 'ok' }], stopReason: 'end_turn', usage: { inputTokens: 120, outputTokens: 7 } };
    },
  };
  const branch = observeModel(model, 'branch', metrics.modelObserver);
  const request = { system: 's', messages: [{ role: 'user' as const, content: 'hi' }], maxTokens: 10 };
  await branch.createMessage(request);
  await branch.createMessage(request);
  fail = true;
  await assert.rejects(branch.createMessage(request), /overloaded/);
  const broken = observeModel(model, 'worker', { modelCalled: () => { throw new Error('observer broke'); } });
  fail = false;
  assert.equal((await broken.createMessage(request)).usage.inputTokens, 120, 'a broken observer never fails the call');
  const samples = parseMetrics(await metrics.text());
  assert.equal(sampleValue(samples, 'magpie_model_requests_total', { purpose: 'branch', outcome: 'ok' }), 2);
  assert.equal(sampleValue(samples, 'magpie_model_requests_total', { purpose: 'branch', outcome: 'error' }), 1);
  assert.equal(sampleValue(samples, 'magpie_model_tokens_total', { purpose: 'branch', direction: 'input' }), 240);
  assert.equal(sampleValue(samples, 'magpie_model_tokens_total', { purpose: 'branch', direction: 'output' }), 14);
  assert.equal(sampleValue(samples, 'magpie_model_request_duration_seconds_count', { purpose: 'branch' }), 3);
});

test('readiness lists every failing condition; a taken port leaves the endpoint off with a reason', async () => {
  const readiness = new Readiness();
  let open = false;
  readiness.require('database', () => (open ? undefined : 'database not open yet'));
  readiness.require('discord', () => {
    throw new Error('client gone');
  });
  assert.deepEqual(readiness.problems(), ['database not open yet', 'discord check failed: client gone']);
  open = true;
  readiness.require('discord', () => undefined);
  assert.deepEqual(readiness.problems(), []);

  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const port = (blocker.address() as AddressInfo).port;
  try {
    const endpoint = await openOperatorEndpoint({ listen: `127.0.0.1:${port}`, events: new EventStream() });
    assert.equal(endpoint.server, undefined);
    assert.equal(endpoint.problem?.code, 'metrics_listen_failed');
    assert.match(endpoint.problem!.message, /EADDRINUSE/);
    assert.equal(endpoint.problem!.context.key, 'metrics.listen');
    await endpoint.close();
    const off = await openOperatorEndpoint({ listen: '', events: new EventStream() });
    assert.equal(off.server, undefined);
    assert.equal(off.problem, undefined);
    await off.close();
  } finally {
    blocker.close();
  }
});

test('the usage histogram renders cumulative buckets, +Inf, sum and count, and ignores non-numbers', async () => {
  const metrics = new MagpieMetrics({ defaultMetrics: false });
  for (const usage of [0.05, 0.1, 0.5, 0.97, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) metrics.contextUsage.observe(usage);
  const samples = parseMetrics(await metrics.text());
  const bucket = (le: string) => sampleValue(samples, 'magpie_context_usage_ratio_bucket', { le });
  assert.equal(bucket('0.1'), 2, 'a value on a bound counts in that bucket');
  assert.equal(bucket('0.4'), 2);
  assert.equal(bucket('0.5'), 3);
  assert.equal(bucket('0.95'), 3);
  assert.equal(bucket('1'), 4);
  assert.equal(bucket('+Inf'), 5, 'over the last bound: only in +Inf');
  assert.equal(sampleValue(samples, 'magpie_context_usage_ratio_count'), 5);
  assert.equal(sampleValue(samples, 'magpie_context_usage_ratio_sum'), 0.05 + 0.1 + 0.5 + 0.97 + 1.5);
  metrics.contextUsage.reset();
  assert.equal(sampleValue(parseMetrics(await metrics.text()), 'magpie_context_usage_ratio_count'), 0);
});

test('the database condition of /readyz: open, and taking writes', () => {
  assert.equal(databaseProblem({ db: { open: true }, storage: { healthy: true, problem: undefined } }), undefined);
  assert.equal(databaseProblem({ db: { open: false }, storage: { healthy: true, problem: undefined } }), 'database closed');
  assert.equal(
    databaseProblem({ db: { open: true }, storage: { healthy: false, problem: { message: 'disk full (ENOSPC)' } } }),
    'storage failing: disk full (ENOSPC)',
  );
  // PostgreSQL: the lock session away is a reconnect; the writer lock taken by another process is
  // a failure for good, and /readyz says that rather than "being reopened".
  const connection = (locks: boolean) => ({ health: () => ({ state: 'up', lastError: undefined }), locksHeld: () => locks });
  assert.equal(
    databaseProblem({ db: { open: true }, storage: { healthy: true, problem: undefined }, connection: connection(false) }),
    'PostgreSQL writer lock not held (its connection is being reopened)',
  );
  assert.equal(
    databaseProblem({
      db: { open: true },
      storage: { healthy: false, problem: { message: 'another process took the writer lock all while this one was reconnecting: this process no longer writes' } },
      connection: connection(false),
    }),
    'storage failing: another process took the writer lock all while this one was reconnecting: this process no longer writes',
  );
});
