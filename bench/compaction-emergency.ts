/** Emergency truncation of a 200,000-token history: in memory plus one small SQLite transaction. */
import { median, p99, timeOnce, type BenchReport } from './harness.js';
import { benchConfig, fillHistory, openBenchRuntime } from './compaction-support.js';

const SAMPLES = 25;

export async function run(): Promise<BenchReport> {
  const bench = await openBenchRuntime(benchConfig(200_000));
  const { runtime } = bench;
  const times: number[] = [];
  let entries = 0;
  let tokens = 0;
  for (let sample = 0; sample < SAMPLES + 3; sample += 1) {
    const channelId = `channel-${sample}`;
    // ~55 tokens a message: 3,640 messages ≈ 200,000 tokens, over the 0.95 threshold.
    tokens = await fillHistory(bench.db, channelId, 3640);
    entries = 3640;
    await runtime.liveContext(channelId);
    let action = '';
    const elapsed = await timeOnce(async () => (action = await runtime.check(channelId)));
    if (action !== 'emergency') throw new Error(`expected an emergency truncation, got ${action}`);
    if (sample >= 3) times.push(elapsed);
  }
  await bench.close();
  return {
    name: 'compaction-emergency',
    metrics: [
      { name: 'emergency truncation median', value: median(times), unit: 'ms', target: '< 5 ms' },
      { name: 'emergency truncation p99', value: p99(times), unit: 'ms' },
    ],
    notes: [`history of ${entries} messages, ${tokens} estimated tokens in a 200,000-token window; half dropped, one marker written`],
  };
}
