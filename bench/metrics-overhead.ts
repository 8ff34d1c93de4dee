/**
 * What metrics cost where they run most often: the Compactor check (a usage histogram
 * observation each time) and a scrape of /metrics' text. Measured against the plain check in
 * the same run.
 */
import { MagpieMetrics } from '../src/metrics/index.js';
import { median, timeBatches, timeMany, type BenchReport } from './harness.js';
import { benchConfig, fillHistory, openBenchRuntime } from './compaction-support.js';

export async function run(): Promise<BenchReport> {
  const metrics = new MagpieMetrics();
  const config = benchConfig(1_000_000_000);
  const plain = await openBenchRuntime(config);
  const observed = await openBenchRuntime(config, {
    observer: {
      messageIngested: () => metrics.messagesIngested.inc(),
      usageChecked: (usage) => metrics.contextUsage.observe(usage),
    },
  });
  await fillHistory(plain.db, 'channel', 1000);
  await fillHistory(observed.db, 'channel', 1000);
  await plain.runtime.check('channel');
  await observed.runtime.check('channel');
  const options = { batches: 40, batch: 20_000 };
  const without: number[] = [];
  const withMetrics: number[] = [];
  for (let round = 0; round < 5; round += 1) {
    without.push(...timeBatches(() => plain.runtime.check('channel'), options));
    withMetrics.push(...timeBatches(() => observed.runtime.check('channel'), options));
  }
  await plain.close();
  await observed.close();
  const scrape = await timeMany(() => metrics.text(), { samples: 200, warmup: 20 });
  const withoutUs = median(without) * 1000;
  const withUs = median(withMetrics) * 1000;
  return {
    name: 'metrics-overhead',
    metrics: [
      { name: 'check() median without metrics', value: withoutUs, unit: 'µs' },
      { name: 'check() median with the usage histogram', value: withUs, unit: 'µs', target: '< 10 µs' },
      { name: 'added per check', value: withUs - withoutUs, unit: 'µs', target: 'reported' },
      { name: 'rendering /metrics (all Magpie and process metrics)', value: median(scrape), unit: 'ms', target: 'reported' },
    ],
  };
}
