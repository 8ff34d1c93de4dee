/** The Compactor check costs the same at 100 and at 100,000 messages (running totals, no I/O). */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../src/common/clock.js';
import { CompactionLog } from '../src/compaction-log/index.js';
import { openDatabase } from '../src/storage/database.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { median, timeBatches, type BenchReport } from './harness.js';
import { benchConfig, fillHistory, openBenchRuntime } from './compaction-support.js';

export async function run(): Promise<BenchReport> {
  // A window so large that no check ever acts: what is timed is the decision itself.
  const bench = await openBenchRuntime(benchConfig(1_000_000_000));
  await fillHistory(bench.db, 'small', 100);
  await fillHistory(bench.db, 'large', 100_000);
  await fillHistory(bench.db, 'calibrated', 100_000);
  const { runtime } = bench;
  await runtime.check('small');
  await runtime.check('large');
  // A channel whose factor a model count has set: the check multiplies once more, nothing else.
  await runtime.recordUsage('calibrated', 100_000, 400_000);
  await runtime.check('calibrated');
  // The same with the compaction log watching every check, as `start` and `chat` run it.
  const dir = mkdtempSync(join(tmpdir(), 'magpie-bench-'));
  const logDb = await openDatabase(dir, ALL_MIGRATIONS);
  const log = new CompactionLog({ db: logDb, clock: systemClock, retentionDays: () => 30 });
  const watched = await openBenchRuntime(benchConfig(1_000_000_000), { usageObserver: log }, dir);
  await fillHistory(watched.db, 'large', 100_000);
  await watched.runtime.check('large');
  const options = { batches: 40, batch: 20_000 };
  const small: number[] = [];
  const large: number[] = [];
  const calibrated: number[] = [];
  const largeLogged: number[] = [];
  // Interleaved rounds so that machine noise hits every variant alike.
  for (let round = 0; round < 5; round += 1) {
    small.push(...timeBatches(() => runtime.check('small'), options));
    large.push(...timeBatches(() => runtime.check('large'), options));
    calibrated.push(...timeBatches(() => runtime.check('calibrated'), options));
    largeLogged.push(...timeBatches(() => watched.runtime.check('large'), options));
  }
  await bench.close();
  await log.close();
  await logDb.close();
  await watched.close();
  const smallUs = median(small) * 1000;
  const largeUs = median(large) * 1000;
  const calibratedUs = median(calibrated) * 1000;
  const loggedUs = median(largeLogged) * 1000;
  return {
    name: 'compaction-check',
    metrics: [
      { name: 'check() median at 100 messages', value: smallUs, unit: 'µs', target: '< 10 µs' },
      { name: 'check() median at 100,000 messages', value: largeUs, unit: 'µs', target: '< 10 µs' },
      { name: 'ratio 100,000 / 100', value: largeUs / smallUs, unit: '×', target: '≤ 1.5' },
      { name: 'check() median at 100,000 messages, calibrated ×4', value: calibratedUs, unit: 'µs', target: '< 10 µs' },
      { name: 'ratio calibrated / uncalibrated at 100,000', value: calibratedUs / largeUs, unit: '×', target: '≤ 1.5' },
      { name: 'check() median at 100,000 messages, compaction log watching', value: loggedUs, unit: 'µs', target: '< 10 µs' },
      { name: 'ratio with log / without', value: loggedUs / largeUs, unit: '×', target: 'reported' },
    ],
  };
}
