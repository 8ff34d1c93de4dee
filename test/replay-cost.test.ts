import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { describeContext } from '../src/app/channel-commands.js';
import { checkConfigText } from '../src/config/index.js';
import type { ContextStatus } from '../src/context/types.js';
import { startFakeAnthropic, type FakeAnthropic, type RecordedRequest } from './fakes/fake-anthropic.js';
import { FakePromptCache } from './fakes/fake-prompt-cache.js';
import { runMagpie } from './support/magpie-process.js';

const ENV = { ...process.env, LOG_LEVEL: 'silent', MAGPIE_DATA_DIR: '' };

function isSummarizer(request: RecordedRequest): boolean {
  const tools = (request.body?.tools ?? []) as Array<{ name: string }>;
  return tools.length === 1 && tools[0]!.name === 'memory_save';
}

/** 150 messages of a busy channel, the bot answering every fifth. */
function transcript(): string {
  const lines: string[] = [];
  let time = Date.UTC(2025, 2, 3, 10);
  for (let index = 0; index < 150; index += 1) {
    time += 20_000;
    lines.push(JSON.stringify({ id: `m${index}`, channel: 'c1', author: `p${index % 3}`, content: `message ${index} about the garden, the fence and the budget for spring planting`, ts: time }));
    if (index % 5 === 4) lines.push(JSON.stringify({ id: `r${index}`, channel: 'c1', author: 'Magpie', role: 'assistant', content: `Noted, item ${index}.`, ts: time + 1_000 }));
  }
  return `${lines.join('\n')}\n`;
}

describe('what a replay says a channel costs', () => {
  let fake: FakeAnthropic;
  let dir: string;
  let failNext = 0;
  before(async () => {
    fake = await startFakeAnthropic({ promptCache: new FakePromptCache() });
    fake.setDefault((request) => {
      if (!isSummarizer(request) && failNext > 0) {
        failNext -= 1;
        return { status: 500, message: 'overloaded for a moment', headers: { 'x-should-retry': 'false' } };
      }
      return isSummarizer(request) ? { text: 'They planned the garden and the fence. '.repeat(30) } : { text: 'ok' };
    });
    dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-replay-cost-'));
    writeFileSync(path.join(dir, 'chat.jsonl'), transcript());
    const config = (cache: string) =>
      `[defaults]\ncontext_window = 4000\nmax_response_tokens = 256\n[llm]\nmodel = "claude-test"\nbase_url = "${fake.baseUrl}"\nmax_retries = 0\n` +
      `prompt_cache = "${cache}"\ncache_min_tokens = 0\nprice_input_per_mtok = 3\nprice_output_per_mtok = 15\n`;
    writeFileSync(path.join(dir, 'on.toml'), config('5m'));
    writeFileSync(path.join(dir, 'off.toml'), config('off'));
  });
  after(async () => {
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const replay = (name: string, dataDir = name) =>
    runMagpie(['replay', 'chat.jsonl', '--data-dir', dataDir, '--config', `${name}.toml`, '--summarizer', 'llm', '--cost-replies', '--json'], { cwd: dir, env: ENV });

  it('prices every reply, and the cache makes them cheaper', async () => {
    const runs: Record<string, any> = {};
    for (const name of ['off', 'on']) {
      const run = await replay(name);
      assert.equal(run.code, 0, run.stderr);
      runs[name] = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    }
    const { on, off } = runs;
    assert.equal(on.cost.replies.calls, 30);
    assert.equal(off.cost.replies.cache_read_tokens, 0);
    assert.equal(off.cost.replies.billed_input_tokens, off.cost.replies.input_tokens);
    assert.ok(on.cost.replies.cache_hit_ratio > 0.5, `hit ratio ${on.cost.replies.cache_hit_ratio}`);
    assert.ok(on.cost.billed_input_per_reply < off.cost.billed_input_per_reply / 2, `${on.cost.billed_input_per_reply} vs ${off.cost.billed_input_per_reply}`);
    assert.ok(on.cost.compaction.calls > 0, 'the summaries are counted too');
    assert.ok(on.cost.replies.price > 0);
    assert.deepEqual(on.tiers, off.tiers, 'the cache changes the bill, not what compaction does');
    assert.equal(on.archived_messages, 180);
  });

  it('status shows the last request and its cached share', async () => {
    const run = await runMagpie(['status', '--data-dir', 'on', '--config', 'on.toml', '--json'], { cwd: dir, env: ENV });
    assert.equal(run.code, 0, run.stderr);
    const [channel] = JSON.parse(run.stdout).channels;
    const last = channel.last_request;
    // The last reply may follow a compaction that rewrote the head, and then it writes the cache
    // instead of reading it: either way the split is recorded and the share follows from it.
    assert.ok(last.cache_read_tokens > 0 || last.cache_write_tokens > 0, JSON.stringify(last));
    assert.ok(last.input_tokens >= last.cache_read_tokens + last.cache_write_tokens, JSON.stringify(last));
    assert.ok(Math.abs(last.cached_share - last.cache_read_tokens / last.input_tokens) < 0.01, JSON.stringify(last));
    const table = await runMagpie(['status', '--data-dir', 'on', '--config', 'on.toml'], { cwd: dir, env: ENV });
    assert.match(table.stdout, /last request cached/);
    assert.match(table.stdout, /\d+% of [\d,]+/);
  });

  it('the report, and --compare, show the cost per reply and the hit ratio over time', async () => {
    const run = await runMagpie(['report', '--data-dir', 'off', '--compare', 'on', '--config', 'on.toml', '--out', '-'], { cwd: dir, env: ENV });
    assert.equal(run.code, 0, run.stderr);
    const cost = run.stdout.slice(run.stdout.indexOf('<section id="cost">'));
    assert.match(cost, /What the replies cost/);
    assert.match(cost, /billed-equivalent input per reply<\/th><td>[\d,]+<\/td><td>[\d,]+<\/td>/);
    assert.match(cost, /billed-equivalent input per 1,000 messages/);
    assert.match(cost, /cache hit ratio \(read \/ input\)<\/th><td>0<\/td><td>0\.[5-9]\d\d<\/td>/);
    assert.match(cost, /<figure class="cost-chart" data-channel="c1">.*<path d="M[^"]+" fill="none"/s);
  });

  it('a failed pricing call is reported and loses nothing', async () => {
    failNext = 2;
    const run = await replay('on', 'again');
    assert.equal(run.code, 0, run.stderr);
    const summary = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    assert.equal(summary.cost.replies.failed, 2);
    assert.equal(summary.archived_messages, 180);
  });

  it('with cold_cache_threshold, a gap longer than the cache lifetime compacts in the gap', async () => {
    const lines = transcript().trim().split('\n').map((line) => JSON.parse(line));
    // Twenty idle minutes before the 120th line: the cache is cold when it arrives.
    for (const line of lines.slice(120)) line.ts += 20 * 60_000;
    writeFileSync(path.join(dir, 'gap.jsonl'), `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`);
    writeFileSync(path.join(dir, 'cold.toml'), `${readFileSync(path.join(dir, 'on.toml'), 'utf8')}[defaults.compaction]\ncold_cache_threshold = 0.3\n`);
    const run = await runMagpie(['replay', 'gap.jsonl', '--data-dir', 'cold', '--config', 'cold.toml', '--summarizer', 'llm', '--cost-replies', '--json'], { cwd: dir, env: ENV });
    assert.equal(run.code, 0, run.stderr);
    const events = run.stdout.trim().split('\n').map((line) => JSON.parse(line));
    const cold = events.findIndex((event) => event.type === 'compaction_triggered' && event.reason === 'cache_cold');
    assert.ok(cold >= 0, 'a compaction started in the gap');
    const next = events.slice(cold + 1).find((event) => event.type === 'compaction_completed' || event.type === 'compaction_triggered');
    assert.equal(next?.type, 'compaction_completed', 'it landed before anything else was compacted');
    assert.equal(next?.tier, 'background');
    assert.equal(events.at(-1).archived_messages, 180);
    const refused = checkConfigText('[defaults.compaction]\ncold_cache_threshold = 1.5\n');
    assert.equal(refused.ok, false);
    if (!refused.ok) assert.equal(refused.problems[0]!.path, 'defaults.compaction.cold_cache_threshold');
  });

  it('--cost-replies without a model says what to set', async () => {
    writeFileSync(path.join(dir, 'none.toml'), '[llm]\nmodel = ""\n');
    const run = await runMagpie(['replay', 'chat.jsonl', '--data-dir', 'none', '--config', 'none.toml', '--cost-replies'], { cwd: dir, env: ENV });
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /--cost-replies needs a model: \[llm\] model is empty/);
  });

  it('/context says what the last request read from the cache', () => {
    const status = {
      channelId: 'c1',
      usage: 0.5,
      estimatedTokens: 1000,
      calibratedTokens: 1000,
      contextWindow: 4000,
      usableWindow: 3000,
      thresholds: { background: 0.8, aggressive: 0.85, emergency: 0.95 },
      liveMessages: 3,
      summaries: 0,
      archivedMessages: 3,
      compactionRunning: false,
      calibration: { factor: 1, observations: 0 },
      lastRequest: { at: 0, usage: { inputTokens: 100, outputTokens: 5, cacheReadTokens: 9_000, cacheWriteTokens: 900 } },
    } as unknown as ContextStatus;
    assert.match(describeContext(status, 0), /Last request: 10,000 input tokens, 90(\.0)?% read from the prompt cache, 900 written to it; billed as 2,125/);
  });
});
