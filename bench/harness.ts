/** Small helpers shared by every benchmark: timing, medians, percentiles, report printing. */
import v8 from 'node:v8';
import vm from 'node:vm';

export interface BenchMetric {
  name: string;
  value: number;
  unit: string;
  /** Optional target, printed next to the value for the reader ("≤ 2 ms"). */
  target?: string;
}

export interface BenchReport {
  name: string;
  metrics: BenchMetric[];
  notes?: string[];
}

export type Benchmark = () => Promise<BenchReport>;

export function median(values: readonly number[]): number {
  return percentile(values, 0.5);
}

export function p99(values: readonly number[]): number {
  return percentile(values, 0.99);
}

export function percentile(values: readonly number[], fraction: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1));
  return sorted[index]!;
}

/** Milliseconds taken by one call, with sub-microsecond resolution. */
export async function timeOnce(work: () => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** Runs `work` `warmup` times untimed, then `samples` times timed; returns the times in ms. */
export async function timeMany(
  work: () => unknown,
  options: { samples: number; warmup?: number },
): Promise<number[]> {
  for (let index = 0; index < (options.warmup ?? Math.min(10, options.samples)); index += 1) await work();
  const times: number[] = [];
  for (let index = 0; index < options.samples; index += 1) times.push(await timeOnce(work));
  return times;
}

/** Synchronous variant for very cheap calls: times `batch` calls together and divides. */
export function timeBatches(work: () => unknown, options: { batches: number; batch: number }): number[] {
  const times: number[] = [];
  for (let round = 0; round < options.batches + 3; round += 1) {
    const start = process.hrtime.bigint();
    for (let index = 0; index < options.batch; index += 1) work();
    const elapsed = Number(process.hrtime.bigint() - start) / 1e6 / options.batch;
    if (round >= 3) times.push(elapsed);
  }
  return times;
}

export function formatReport(report: BenchReport): string {
  const lines = [`## ${report.name}`];
  for (const metric of report.metrics) {
    const value = Number.isInteger(metric.value) ? String(metric.value) : metric.value.toPrecision(4);
    lines.push(`  ${metric.name}: ${value} ${metric.unit}${metric.target ? `   (target ${metric.target})` : ''}`);
  }
  for (const note of report.notes ?? []) lines.push(`  note: ${note}`);
  return lines.join('\n');
}

let collector: (() => void) | undefined;

/**
 * A full garbage collection, whether or not node was started with --expose-gc: a round that
 * follows others starts from a collected heap, as a fresh process would, instead of paying for
 * the earlier rounds' garbage in its own collections (a dozen earlier bursts had left a heap of
 * 2 GB, 29 MB once collected).
 */
export function collectGarbage(): void {
  if (!collector) {
    const exposed = (globalThis as { gc?: () => void }).gc;
    if (exposed) collector = exposed;
    else {
      v8.setFlagsFromString('--expose-gc');
      collector = vm.runInNewContext('gc') as () => void;
    }
  }
  // Twice: the first pass finds what only a second can free (weak references, finalizers).
  collector();
  collector();
}
