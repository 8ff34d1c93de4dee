/** /metrics passes Prometheus' own lint: promtool's rules always, promtool itself when installed. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { EventStream } from '../src/common/events.js';
import { attachEventMetrics, MagpieMetrics } from '../src/metrics/index.js';
import { NOT_COUNTERS } from '../src/metrics/magpie-metrics.js';
import { lintMetrics } from './support/prometheus-lint.js';

/** Every metric with samples: events of each kind, sources attached. */
async function exposition(): Promise<string> {
  const metrics = new MagpieMetrics();
  const events = new EventStream();
  attachEventMetrics(events, metrics);
  metrics.attachSources({
    channelsLoaded: () => 3,
    memoryStats: () => ({ memories: 2, transcriptEntries: 10, byType: { fact: 2 }, embedder: 'hash-v1', dimension: 256, indexedVectors: 12, pendingVectors: 0 }),
  });
  events.emit({ type: 'compaction_completed', channel_id: 'c1', tier: 'background', tokens_freed: 500, duration_ms: 1200 });
  events.emit({ type: 'emergency_truncation', channel_id: 'c1', tokens_freed: 900 });
  metrics.messagesIngested.inc();
  metrics.modelObserver.modelCalled({ model: 'claude-test', purpose: 'channel', outcome: 'ok', inputTokens: 100, outputTokens: 20, cacheWriteTokens: 40, cacheReadTokens: 60, billedInputTokens: 56, durationMs: 300 });
  return metrics.text();
}

/** promtool from PATH, or MAGPIE_PROMTOOL; undefined when neither is there. */
function promtool(): string | undefined {
  const named = process.env.MAGPIE_PROMTOOL;
  if (named && existsSync(named)) return named;
  for (const directory of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(directory, 'promtool');
    if (directory !== '' && existsSync(candidate)) return candidate;
  }
  return undefined;
}

test('the lint rules catch what promtool refuses', () => {
  const bad = [
    '# HELP nodejs_active_handles_total Total number of active handles.',
    '# TYPE nodejs_active_handles_total gauge',
    'nodejs_active_handles_total 4',
    '# TYPE app_requests counter',
    'app_requests 1',
    '# HELP app_latency_ms Latency.',
    '# TYPE app_latency_ms gauge',
    'app_latency_ms 3',
    '# HELP app_wait_milliseconds Waiting.',
    '# TYPE app_wait_milliseconds gauge',
    'app_wait_milliseconds 3',
  ].join('\n');
  assert.deepEqual(
    lintMetrics(bad).map((problem) => `${problem.metric}: ${problem.text}`),
    [
      'nodejs_active_handles_total: non-counter metrics should not have "_total" suffix',
      'app_requests: no help text',
      'app_requests: counter metrics should have "_total" suffix',
      'app_latency_ms: metric names should not contain abbreviated units',
      'app_wait_milliseconds: use base unit "seconds" instead of "milliseconds"',
    ],
  );
});

test('every metric Magpie serves passes the lint rules, the default Node ones included', async () => {
  const text = await exposition();
  assert.deepEqual(lintMetrics(text), []);
  for (const name of NOT_COUNTERS) assert.ok(!text.includes(`${name} `), `${name} is left out`);
  assert.match(text, /^nodejs_active_handles\{/m, 'the per-type gauges stay');
  assert.match(text, /^magpie_compaction_freed_tokens_sum /m, 'tokens carry their unit');
});

test('promtool check metrics passes on the same text', async (context) => {
  const tool = promtool();
  if (!tool) {
    context.skip('promtool is not installed (Debian: apt-get install prometheus; or set MAGPIE_PROMTOOL)');
    return;
  }
  const result = spawnSync(tool, ['check', 'metrics'], { input: await exposition(), encoding: 'utf8' });
  assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
});
