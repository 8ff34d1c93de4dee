/**
 * What the prompt cache saves on a busy channel: a few thousand messages with a reply every few
 * messages, replayed through `magpie replay --summarizer llm --cost-replies` against the fake
 * Messages API with its prompt-cache accounting (on the transcript's own clock). The same
 * transcript is replayed with `[llm] prompt_cache` off, "5m" and "1h"; each run prints the
 * billed-equivalent input per reply (input weighted as billed: cache reads 0.1×, writes 1.25×
 * or 2×), the cache hit ratio, and the compaction tiers that fired, which must match across runs.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { replay } from '../src/cli/commands/replay.js';
import { TranscriptClock } from '../src/cli/replay-lines.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { SUGGESTED_MODEL } from '../src/llm/anthropic-model.js';
import type { MagpieConfig, PromptCacheSetting } from '../src/config/types.js';
import { startFakeAnthropic, type RecordedRequest } from '../test/fakes/fake-anthropic.js';
import { FakePromptCache } from '../test/fakes/fake-prompt-cache.js';
import type { BenchReport } from './harness.js';

const MESSAGES = Number(process.env.MAGPIE_BENCH_CACHE_MESSAGES ?? 3000);
const REPLY_EVERY = 5;
const WINDOW = 40_000;
const START = Date.UTC(2025, 0, 6, 9);
/** The early threshold tried for channels whose cache went cold (`cold_cache_threshold`). */
const COLD_THRESHOLD = 0.6;
const WORDS = 'garden release budget invoice Friday deploy tomatoes fence Postgres train piano hiking review design meeting notes'.split(' ');

/** One busy channel: four people, a message every 10–50 s, a quiet hour every 500 messages, the bot answering every few. */
function transcript(): string {
  const lines: string[] = [];
  let time = START;
  let bot = 0;
  for (let index = 0; index < MESSAGES; index += 1) {
    time += 10_000 + ((index * 7919) % 40_000) + (index > 0 && index % 500 === 0 ? 3_600_000 : 0);
    const length = 15 + ((index * 13) % 45);
    const text = Array.from({ length }, (_, word) => WORDS[(index * 31 + word * 7) % WORDS.length]).join(' ');
    lines.push(JSON.stringify({ id: `m${index}`, channel: 'busy', author: `person${index % 4}`, content: `${text} (${index}).`, ts: time }));
    if ((index + 1) % REPLY_EVERY === 0) {
      bot += 1;
      time += 4_000;
      const answer = Array.from({ length: 25 }, (_, word) => WORDS[(bot * 17 + word * 3) % WORDS.length]).join(' ');
      lines.push(JSON.stringify({ id: `r${bot}`, channel: 'busy', author: 'Magpie', role: 'assistant', content: `${answer}.`, ts: time }));
    }
  }
  return `${lines.join('\n')}\n`;
}

function isSummarizer(request: RecordedRequest): boolean {
  const tools = (request.body?.tools ?? []) as Array<{ name: string }>;
  return tools.length === 1 && tools[0]!.name === 'memory_save';
}

interface RunFigures {
  setting: PromptCacheSetting;
  /** `[defaults.compaction] cold_cache_threshold` of the run (0 = off). */
  cold: number;
  perReply: number;
  hitRatio: number;
  per1000: number;
  replies: number;
  cacheWrite: number;
  cacheRead: number;
  tiers: { background: number; aggressive: number; emergency: number };
}

async function replayWith(setting: PromptCacheSetting, file: string, cold = 0): Promise<RunFigures> {
  const clock = new TranscriptClock();
  const fake = await startFakeAnthropic({ promptCache: new FakePromptCache({ now: () => clock.current }) });
  const summary = `They went over ${WORDS.join(', ')}. `.repeat(20);
  fake.setDefault((request) => (isSummarizer(request) ? { text: summary } : { text: 'Noted.' }));
  const dataDir = mkdtempSync(join(tmpdir(), 'magpie-bench-cache-'));
  const config: MagpieConfig = {
    ...DEFAULTS,
    defaults: { ...DEFAULTS.defaults, contextWindow: WINDOW, compaction: { ...DEFAULTS.defaults.compaction, coldCacheThreshold: cold } },
    llm: { ...DEFAULTS.llm, model: SUGGESTED_MODEL, baseUrl: fake.baseUrl, maxRetries: 0, promptCache: setting },
    memory: { ...DEFAULTS.memory, dataDir },
  };
  let out = '';
  const stdout = new Writable({ write: (chunk, _encoding, done) => ((out += String(chunk)), done()) });
  try {
    const code = await replay({
      io: { stdout, stderr: new PassThrough(), stdin: new PassThrough(), env: {}, cwd: dataDir },
      transcript: file,
      dataDir,
      config,
      summarizerKind: 'llm',
      workerLag: 0,
      json: true,
      acceptInvalidUtf8: false,
      costReplies: true,
      clock,
    });
    if (code !== 0) throw new Error(`replay exited ${code}`);
  } finally {
    await fake.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const result = JSON.parse(out.trim().split('\n').at(-1)!);
  const replies = result.cost.replies;
  return {
    setting,
    cold,
    perReply: result.cost.billed_input_per_reply,
    hitRatio: replies.cache_hit_ratio,
    per1000: result.cost.billed_input_per_1000_messages,
    replies: replies.calls,
    cacheWrite: replies.cache_write_tokens + (result.cost.compaction?.cache_write_tokens ?? 0),
    cacheRead: replies.cache_read_tokens + (result.cost.compaction?.cache_read_tokens ?? 0),
    tiers: result.tiers,
  };
}

export async function run(): Promise<BenchReport> {
  const dir = mkdtempSync(join(tmpdir(), 'magpie-bench-transcript-'));
  const file = join(dir, 'busy.jsonl');
  writeFileSync(file, transcript());
  try {
    const runs: RunFigures[] = [];
    for (const setting of ['off', '5m', '1h'] as const) runs.push(await replayWith(setting, file));
    const off = runs[0]!;
    const cold = await replayWith('5m', file, COLD_THRESHOLD);
    const tiers = (figures: RunFigures) => `${figures.tiers.background}/${figures.tiers.aggressive}/${figures.tiers.emergency}`;
    return {
      name: `prompt cache: a busy channel, ${MESSAGES} messages, a reply every ${REPLY_EVERY}, ${WINDOW.toLocaleString('en-US')}-token window, LLM summaries`,
      metrics: runs.flatMap((figures) => [
        { name: `billed input per reply, prompt_cache ${figures.setting}`, value: figures.perReply, unit: 'tokens', ...(figures.setting === '5m' ? { target: `≤ ${Math.round(off.perReply * 0.25)} (25% of off)` } : {}) },
        ...(figures.setting === 'off'
          ? []
          : [
              { name: `  ratio to off (${figures.setting})`, value: Math.round((figures.perReply / off.perReply) * 1000) / 1000, unit: '×', ...(figures.setting === '5m' ? { target: '≤ 0.25' } : {}) },
              { name: `  cache hit ratio (${figures.setting})`, value: figures.hitRatio, unit: 'of reply input' },
            ]),
      ]),
      notes: [
        ...runs.map(
          (figures) =>
            `prompt_cache ${figures.setting}: ${figures.replies} replies priced; ${figures.per1000} billed input tokens per 1,000 messages (replies and summaries); ` +
            `cache writes ${figures.cacheWrite}, reads ${figures.cacheRead}; tiers background/aggressive/emergency ${tiers(figures)}`,
        ),
        runs.every((figures) => tiers(figures) === tiers(off)) ? 'the compaction tiers fired the same in every run' : 'WARNING: the compaction tiers differ between runs',
        `prompt_cache 5m with cold_cache_threshold ${COLD_THRESHOLD} (compact early in the quiet hours): ${cold.perReply} billed input per reply ` +
          `(${Math.round((cold.perReply / runs[1]!.perReply) * 1000) / 10}% of 5m without it), ${cold.per1000} per 1,000 messages, ` +
          `cache writes ${cold.cacheWrite}; tiers ${tiers(cold)}`,
      ],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
