import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HashingEmbedder } from '../src/memory/hashing-embedder.js';
import { checkIndexFile, writeSidecar } from '../src/memory/index-file.js';
import { DEFAULT_HNSW_PARAMS, HnswVectorIndex } from '../src/memory/vector-index.js';
import { renameSync } from 'node:fs';
import { median, type BenchReport } from './harness.js';
import { chatLines } from './memory-corpus.js';

const POINTS = 20_000;
const SAMPLES = 7;

/**
 * What checking an index file before hnswlib may read it costs (sidecar, SHA-256 of the file,
 * a walk of its structure), against what loading it costs anyway, for one 20,000-point index.
 */
export async function run(): Promise<BenchReport> {
  const embedder = new HashingEmbedder({ dimension: 256 });
  const params = { ...DEFAULT_HNSW_PARAMS };
  const index = HnswVectorIndex.create({ dimension: embedder.dimension, params, capacity: POINTS });
  chatLines(POINTS, 5).forEach((line, label) => index.add(label, embedder.embedOne(`${line.author}: ${line.text}`)));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-index-'));
  try {
    const file = path.join(dir, 'bench.hnsw');
    await index.save(`${file}.tmp`);
    const sidecar = writeSidecar(file, `${file}.tmp`, {
      index_key: 'bench',
      identity: 'bench',
      dimension: embedder.dimension,
      point_count: index.pointCount,
      high_water: POINTS,
    });
    renameSync(`${file}.tmp`, file);
    renameSync(sidecar, `${file}.meta.json`);
    const expected = { indexKey: 'bench', identity: 'bench', dimension: embedder.dimension, pointCount: index.pointCount, highWater: POINTS };
    const checkTimes: number[] = [];
    const loadTimes: number[] = [];
    for (let sample = 0; sample < SAMPLES; sample += 1) {
      let started = performance.now();
      const check = checkIndexFile(file, expected);
      checkTimes.push(performance.now() - started);
      if (!check.ok) throw new Error(`the benchmark index failed its own check: ${check.reason}`);
      started = performance.now();
      await HnswVectorIndex.load({ dimension: embedder.dimension, params, file });
      loadTimes.push(performance.now() - started);
    }
    const checkMs = median(checkTimes);
    const loadMs = median(loadTimes);
    return {
      name: `index file check before load (${POINTS.toLocaleString('en-US')} points, dimension 256)`,
      metrics: [
        { name: 'check (sidecar + SHA-256 + structure walk)', value: round(checkMs), unit: 'ms' },
        { name: 'hnswlib load', value: round(loadMs), unit: 'ms' },
        { name: 'check / load', value: round(checkMs / loadMs), unit: '×' },
      ],
      notes: [`medians of ${SAMPLES} runs; the check runs once per index load (first search of a channel after start)`],
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
