import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeAnthropic, type RecordedRequest } from './fakes/fake-anthropic.js';
import { startFakeDiscord } from './fakes/fake-discord.js';
import { waitUntil } from './discord-helpers.js';
import { startMagpie } from './support/magpie-process.js';
import { parseMetrics, sampleValue } from './support/prometheus-text.js';
import { lintMetrics } from './support/prometheus-lint.js';

const ALICE = '100000000000000001';
const BOB = '100000000000000002';
const GENERAL = '700000000000000001';

/** Compaction workers are recognised by their own system prompt. */
function isCompaction(request: RecordedRequest): boolean {
  return JSON.stringify(request.body?.system ?? '').includes('long-term record');
}

function logEvents(stdout: string): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function get(base: string, route: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`${base}${route}`);
  return { status: response.status, body: await response.text() };
}

test('magpie start serves /healthz, /readyz and metrics that follow a conversation that compacts', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-metrics-'));
  const discord = await startFakeDiscord({
    users: [
      { id: ALICE, username: 'alice' },
      { id: BOB, username: 'bob' },
    ],
    channels: [{ id: GENERAL, name: 'general', type: 0 }],
  });
  const model = await startFakeAnthropic();
  model.setDefault((request) => {
    if (isCompaction(request)) return { text: 'Alice and Bob went through the release plan item by item.', usage: { inputTokens: 700, outputTokens: 40 } };
    const last = request.body.messages.at(-1);
    const answeredTool = Array.isArray(last?.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
    if (!answeredTool && JSON.stringify(last).includes('look it up')) {
      return { toolUse: [{ name: 'memory_search', input: { query: 'release plan' } }], usage: { inputTokens: 300, outputTokens: 12 } };
    }
    return { text: 'Noted.', usage: { inputTokens: 300, outputTokens: 5 } };
  });
  discord.holdIdentify();
  const configFile = path.join(dir, 'magpie.toml');
  writeFileSync(
    configFile,
    [
      '[defaults]',
      'context_window = 3000',
      '[llm]',
      'model = "claude-test"',
      `base_url = "${model.baseUrl}"`,
      'max_retries = 0',
      '[memory]',
      `data_dir = "${path.join(dir, 'data')}"`,
      '[discord]',
      'debounce_ms = 10',
      'debounce_max_ms = 50',
      'user_turns_per_minute = 0',
      '[metrics]',
      'listen = "127.0.0.1:0"',
      '',
    ].join('\n'),
  );
  const { child, output, exited } = startMagpie(['start', '--config', configFile], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, DISCORD_TOKEN: 'test-token', MAGPIE_DISCORD_API: discord.restApi },
  });
  try {
    await waitUntil(() => output.stdout.includes('"event":"metrics_listening"'), 'the metrics listener', 20_000);
    const listening = logEvents(output.stdout).find((event) => event.event === 'metrics_listening')!;
    const base = `http://${String(listening.address)}`;

    // Connected to the gateway, but the session is not established yet.
    await waitUntil(() => discord.handshakes.length > 0, 'IDENTIFY', 20_000);
    assert.equal((await get(base, '/healthz')).status, 200);
    const notReady = await get(base, '/readyz');
    assert.equal(notReady.status, 503);
    assert.match(notReady.body, /not ready: .*discord not connected yet/);
    assert.equal((await get(base, '/nothing')).status, 404);

    discord.releaseIdentify();
    await waitUntil(async () => (await get(base, '/readyz')).status === 200, '/readyz to turn 200', 20_000);
    await waitUntil(() => output.stdout.includes('magpie is running'), 'bot running', 20_000);
    const before = parseMetrics((await get(base, '/metrics')).body);
    assert.equal(sampleValue(before, 'magpie_messages_ingested_total'), 0);
    assert.equal(sampleValue(before, 'magpie_compactions_total', { tier: 'background', outcome: 'completed' }), 0);
    assert.ok(sampleValue(before, 'process_cpu_user_seconds_total')! >= 0, 'default process metrics are exported');

    // About 100 tokens a message: the 3,000-token window reaches the background tier.
    let sent = 0;
    const say = (authorId: string, content: string, mentionsBot = false) => {
      sent += 1;
      return discord.sendMessage({ channelId: GENERAL, authorId, content, mentionsBot });
    };
    const asked = say(ALICE, 'please look it up: what did we decide about the release plan?', true);
    await discord.waitForPost((message) => message.messageReference?.message_id === asked, { timeoutMs: 20_000 });
    await waitUntil(() => logEvents(output.stdout).some((event) => event.event === 'agent_turn_completed'), 'the first turn', 20_000);
    // One message at a time (each counted before the next), until a worker tier triggers: the
    // usage climbs through 0.80 instead of jumping past 0.95 on a loaded machine.
    const ingested = async () => sampleValue(parseMetrics((await get(base, '/metrics')).body), 'magpie_messages_ingested_total');
    const triggered = () => logEvents(output.stdout).some((event) => event.event === 'compaction_triggered');
    for (let index = 0; index < 60 && !triggered(); index += 1) {
      say(index % 2 === 0 ? ALICE : BOB, `Item ${index} of the release plan: ${'we go through the checklist and note owners. '.repeat(8)}`);
      const expected = sent;
      await waitUntil(async () => (await ingested()) === expected, `message ${expected} counted`, 20_000);
    }
    await waitUntil(() => logEvents(output.stdout).some((event) => event.event === 'compaction_completed'), 'a compaction', 60_000).catch((error: Error) => {
      const seen = logEvents(output.stdout).map((event) => `${String(event.event)}${event.tier ? `:${String(event.tier)}` : ''}${event.reason ? `(${String(event.reason)})` : ''}`);
      throw new Error(`${error.message}; events: ${seen.join(' ')}`);
    });
    // One long message jumps past the emergency threshold.
    say(BOB, `A pasted log: ${'error line with a stack frame and a timestamp. '.repeat(240)}`);
    await waitUntil(() => logEvents(output.stdout).some((event) => event.event === 'emergency_truncation'), 'an emergency truncation', 30_000);
    const last = say(ALICE, 'thanks, that is all', true);
    await discord.waitForPost((message) => message.messageReference?.message_id === last, { timeoutMs: 20_000 });
    await waitUntil(() => logEvents(output.stdout).filter((event) => event.event === 'agent_turn_completed').length === 2, 'two turns', 20_000);
    // Scrape when every compaction has ended and the log did not move during the scrape.
    let text = '';
    let events: Array<Record<string, unknown>> = [];
    await waitUntil(async () => {
      const logged = output.stdout;
      text = (await get(base, '/metrics')).body;
      events = logEvents(logged);
      return logged === output.stdout && settled(logged);
    }, 'compactions settled', 30_000);
    const after = parseMetrics(text);
    assert.deepEqual(lintMetrics(text), [], 'the served /metrics passes promtool check metrics rules');
    const count = (type: string, tier?: string) => events.filter((event) => event.event === type && (tier === undefined || event.tier === tier)).length;

    assert.equal(sampleValue(after, 'magpie_messages_ingested_total'), sent);
    for (const tier of ['background', 'aggressive', 'manual']) {
      assert.equal(sampleValue(after, 'magpie_compactions_total', { tier, outcome: 'completed' }), count('compaction_completed', tier), tier);
      assert.equal(sampleValue(after, 'magpie_compactions_total', { tier, outcome: 'failed' }), count('compaction_failed', tier), tier);
    }
    assert.ok(count('compaction_completed') >= 1);
    assert.equal(sampleValue(after, 'magpie_emergency_truncations_total'), count('emergency_truncation'));
    assert.ok(count('emergency_truncation') >= 1);
    const freed = events.filter((event) => event.event === 'compaction_completed').reduce((sum, event) => sum + Math.max(0, Number(event.tokens_freed)), 0);
    assert.equal(sampleValue(after, 'magpie_compaction_freed_tokens_sum'), freed);
    assert.equal(sampleValue(after, 'magpie_compaction_freed_tokens_count'), count('compaction_completed'));
    for (const tier of ['background', 'aggressive']) {
      const ended = count('compaction_completed', tier) + count('compaction_failed', tier);
      assert.equal(sampleValue(after, 'magpie_compaction_duration_seconds_count', { tier }) ?? 0, ended, tier);
    }

    assert.equal(sampleValue(after, 'magpie_turns_total', { outcome: 'completed' }), 2);
    assert.equal(sampleValue(after, 'magpie_turn_duration_seconds_count'), 2);

    const channelCalls = model.requests.filter((request) => !isCompaction(request));
    const compactionCalls = model.requests.filter(isCompaction);
    assert.equal(channelCalls.length, 3, 'a tool call and its answer, then one more reply');
    assert.equal(sampleValue(after, 'magpie_model_requests_total', { purpose: 'channel', outcome: 'ok' }), channelCalls.length);
    assert.equal(sampleValue(after, 'magpie_model_requests_total', { purpose: 'compaction', outcome: 'ok' }), compactionCalls.length);
    assert.equal(sampleValue(after, 'magpie_model_tokens_total', { purpose: 'channel', direction: 'input' }), 300 * channelCalls.length);
    assert.equal(sampleValue(after, 'magpie_model_tokens_total', { purpose: 'channel', direction: 'output' }), 12 + 5 + 5);
    assert.equal(sampleValue(after, 'magpie_model_tokens_total', { purpose: 'compaction', direction: 'input' }), 700 * compactionCalls.length);
    assert.equal(sampleValue(after, 'magpie_model_tokens_total', { purpose: 'compaction', direction: 'output' }), 40 * compactionCalls.length);
    assert.equal(sampleValue(after, 'magpie_model_request_duration_seconds_count', { purpose: 'channel' }), channelCalls.length);

    assert.ok(sampleValue(after, 'magpie_context_usage_ratio_count')! >= sent, 'a usage check after every message at least');
    assert.equal(sampleValue(after, 'magpie_channels_loaded'), 1);
    assert.ok(sampleValue(after, 'magpie_memory_items', { kind: 'transcript' })! >= sent);
    assert.equal(sampleValue(after, 'magpie_memory_search_duration_seconds_count'), 1);

    for (const id of [GENERAL, ALICE, BOB]) assert.ok(!text.includes(id), `no label carries the id ${id}`);

    child.kill('SIGTERM');
    assert.equal(await exited, 0, output.stderr);
  } finally {
    child.kill('SIGKILL');
    await model.close();
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Every compaction that started has ended (completed, failed or replanned). */
function settled(stdout: string): boolean {
  const events = logEvents(stdout);
  const started = new Set(events.filter((event) => event.event === 'compaction_started').map((event) => event.compaction_id));
  for (const event of events) {
    if (['compaction_completed', 'compaction_failed', 'compaction_replanned'].includes(String(event.event))) started.delete(event.compaction_id);
  }
  return started.size === 0;
}
