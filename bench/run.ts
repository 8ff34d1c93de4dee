import { formatReport, type Benchmark } from './harness.js';

/**
 * `npm run bench` runs every benchmark; `node dist/bench/run.js NAME...` runs the named ones.
 * Each entry is loaded lazily so one benchmark's setup never slows another's.
 */
const BENCHMARKS: Record<string, () => Promise<{ run: Benchmark }>> = {
  'compaction-check': () => import('./compaction-check.js'),
  'compaction-emergency': () => import('./compaction-emergency.js'),
  'compaction-turn-latency': () => import('./compaction-turn-latency.js'),
  'compaction-replay': () => import('./compaction-replay.js'),
  discord: () => import('./discord-latency.js'),
  'discord-ingest': () => import('./discord-ingest.js'),
  'chat-extras': () => import('./chat-extras.js'),
  'chunk-message': () => import('./chunk-message.js'),
  'token-calibration': () => import('./token-calibration.js'),
  'memory-vector': () => import('./memory-vector.js'),
  'memory-search': () => import('./memory-search.js'),
  'memory-search-postgres': () => import('./memory-search-postgres.js'),
  'index-validation': () => import('./index-validation.js'),
  'metrics-overhead': () => import('./metrics-overhead.js'),
  'pg-raw': () => import('./pg-raw.js'),
  'privacy-delete': () => import('./privacy-delete.js'),
  'prompt-cache': () => import('./prompt-cache.js'),
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2);
  const unknown = wanted.filter((name) => !(name in BENCHMARKS));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(BENCHMARKS).join(', ')}\n`);
    process.exit(2);
  }
  for (const name of wanted.length > 0 ? wanted : Object.keys(BENCHMARKS)) {
    const module = await BENCHMARKS[name]!();
    const report = await module.run();
    process.stdout.write(`${formatReport(report)}\n\n`);
  }
}

await main();
