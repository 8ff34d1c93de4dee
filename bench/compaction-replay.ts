/**
 * Replay throughput with the extractive summarizer and the real memory store (transcript
 * archive with FTS and vectors), through the same runtime the bot uses.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChannelRuntime } from '../src/channel/index.js';
import { EventStream } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { replayLines, TranscriptClock } from '../src/cli/replay-lines.js';
import { LaggedScheduler } from '../src/compaction/scheduler.js';
import { LiveConfig } from '../src/config/live-config.js';
import { openMemoryStore } from '../src/memory/index.js';
import { openDatabase } from '../src/storage/database.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { median, type BenchReport } from './harness.js';
import { CompactionLog } from '../src/compaction-log/index.js';
import { benchConfig } from './compaction-support.js';

const MESSAGES = 3000;

function* transcriptLines(count: number): Generator<string> {
  const words = ['budget', 'deploy', 'Paris', 'hiking', 'release', 'invoice', 'cat', 'Friday', 'Postgres', 'garden', 'piano', 'train'];
  for (let index = 0; index < count; index += 1) {
    const length = 8 + ((index * 7) % 30);
    const text = Array.from({ length }, (_, word) => words[(index * 13 + word * 5) % words.length]).join(' ');
    yield JSON.stringify({ id: `m${index}`, channel: `c${index % 5}`, author: index % 2 ? 'ann' : 'ben', content: `${text}.`, ts: 1_700_000_000_000 + index * 60_000 });
  }
}

async function* asAsync(lines: Iterable<string>): AsyncGenerator<string> {
  yield* lines;
}

/** One replay of the transcript into a fresh data dir; with `withLog`, the compaction log records it as `magpie replay` does. */
async function replayOnce(withLog: boolean): Promise<{ perSecond: number; compactions: number; truncations: number; messages: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'magpie-bench-'));
  const db = await openDatabase(dir, ALL_MIGRATIONS);
  const config = benchConfig(4000);
  const memory = await openMemoryStore({ db, dataDir: dir, settings: { ...config.memory, dataDir: dir } });
  const events = new EventStream();
  let compactions = 0;
  let truncations = 0;
  events.subscribe((event) => {
    if (event.type === 'compaction_completed') compactions += 1;
    if (event.type === 'emergency_truncation') truncations += 1;
  });
  const clock = new TranscriptClock();
  const log = withLog ? new CompactionLog({ db, clock, batchSize: 512 }) : undefined;
  log?.attach(events);
  const runtime = new ChannelRuntime({
    db,
    memory,
    config: new LiveConfig(config),
    events,
    summarizer: createExtractiveSummarizer(),
    clock,
    scheduler: new LaggedScheduler(0),
    ...(log ? { usageObserver: log } : {}),
  });
  const started = performance.now();
  const progress = await replayLines({ lines: asAsync(transcriptLines(MESSAGES)), runtime, clock });
  await runtime.flushCompactions();
  await log?.close();
  const seconds = (performance.now() - started) / 1000;
  await runtime.close();
  await memory.close();
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  return { perSecond: progress.messages / seconds, compactions, truncations, messages: progress.messages };
}

export async function run(): Promise<BenchReport> {
  const without: number[] = [];
  const withLog: number[] = [];
  let last = await replayOnce(false);
  // Alternating runs, so machine noise hits both alike.
  for (let round = 0; round < 3; round += 1) {
    last = await replayOnce(false);
    without.push(last.perSecond);
    withLog.push((await replayOnce(true)).perSecond);
  }
  const plain = median(without);
  const logged = median(withLog);
  return {
    name: 'compaction-replay',
    metrics: [
      { name: 'replay throughput (extractive, real memory store)', value: Math.round(plain), unit: 'messages/s' },
      { name: 'replay throughput with the compaction log', value: Math.round(logged), unit: 'messages/s' },
      { name: 'ratio with log / without', value: logged / plain, unit: '×', target: 'reported' },
      { name: 'compactions completed', value: last.compactions, unit: '' },
      { name: 'emergency truncations', value: last.truncations, unit: '' },
    ],
    notes: [`${last.messages} messages in 5 channels, context window 4,000 tokens, worker lag 0; medians of 3 alternating runs each`],
  };
}
