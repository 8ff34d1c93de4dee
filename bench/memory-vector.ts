import { DEFAULT_HNSW_PARAMS } from '../src/memory/vector-index.js';
import { HashingEmbedder } from '../src/memory/hashing-embedder.js';
import { HnswVectorIndex } from '../src/memory/vector-index.js';
import { median, p99, type BenchReport } from './harness.js';
import { chatLines } from './memory-corpus.js';

const ENTRIES = 100_000;
const QUERIES = 100;
const K = 10;

/**
 * HNSW kNN over 100,000 hashed chat messages in one scope, against exact brute force over the
 * very same vectors: latency, recall@10 and the speed-up, in one run.
 */
export async function run(): Promise<BenchReport> {
  const embedder = new HashingEmbedder({ dimension: 256 });
  const lines = chatLines(ENTRIES + QUERIES, 11);
  const vectors = lines.map((line) => embedder.embedOne(`${line.author}: ${line.text}`));
  const data = vectors.slice(0, ENTRIES);
  const queries = vectors.slice(ENTRIES);

  const params = { ...DEFAULT_HNSW_PARAMS };
  const index = HnswVectorIndex.create({ dimension: embedder.dimension, params, capacity: 1024 });
  const buildStart = performance.now();
  data.forEach((vector, label) => index.add(label, vector));
  const buildSeconds = (performance.now() - buildStart) / 1000;

  const bruteForce = (query: Float32Array): number[] => {
    const scores = new Float32Array(data.length);
    for (let item = 0; item < data.length; item += 1) {
      const vector = data[item]!;
      let sum = 0;
      for (let dimension = 0; dimension < vector.length; dimension += 1) sum += vector[dimension]! * query[dimension]!;
      scores[item] = sum;
    }
    // Partial selection of the top k (what a careful exact search would do).
    const top: number[] = [];
    for (let item = 0; item < scores.length; item += 1) {
      if (top.length < K || scores[item]! > scores[top[top.length - 1]!]!) {
        top.push(item);
        top.sort((left, right) => scores[right]! - scores[left]!);
        if (top.length > K) top.pop();
      }
    }
    return top;
  };

  const annTimes: number[] = [];
  const exactTimes: number[] = [];
  let found = 0;
  for (const query of queries.slice(0, 10)) index.search(query, K); // warm-up
  for (const query of queries) {
    let start = performance.now();
    const approximate = index.search(query, K);
    annTimes.push(performance.now() - start);
    start = performance.now();
    const exact = bruteForce(query);
    exactTimes.push(performance.now() - start);
    // Ties at the k-th similarity make "the" exact top 10 ambiguous; count a hit by similarity.
    const threshold = exact.length > 0 ? dotOf(data[exact[exact.length - 1]!]!, query) - 1e-6 : 1;
    found += approximate.filter((hit) => hit.similarity >= threshold).length;
  }
  const recall = found / (queries.length * K);
  return {
    name: `memory-vector: HNSW kNN over ${ENTRIES.toLocaleString('en')} entries in one scope (dimension ${embedder.dimension}, M ${params.m}, efConstruction ${params.efConstruction}, efSearch ${params.efSearch})`,
    metrics: [
      { name: 'HNSW search median', value: median(annTimes), unit: 'ms', target: '≤ 2 ms' },
      { name: 'HNSW search p99', value: p99(annTimes), unit: 'ms' },
      { name: 'recall@10 vs brute force', value: recall, unit: '', target: '≥ 0.95' },
      { name: 'brute force median', value: median(exactTimes), unit: 'ms' },
      { name: 'speed-up over brute force', value: median(exactTimes) / median(annTimes), unit: '×', target: '≥ 20×' },
      { name: 'index build', value: buildSeconds, unit: 's' },
      { name: 'index build rate', value: ENTRIES / buildSeconds, unit: 'points/s' },
      { name: 'peak RSS', value: process.resourceUsage().maxRSS / 1024, unit: 'MiB' },
    ],
    notes: ['queries are held-out messages of the same corpus; recall counts hits at or above the exact 10th similarity'],
  };
}

function dotOf(left: Float32Array, right: Float32Array): number {
  let sum = 0;
  for (let index = 0; index < left.length; index += 1) sum += left[index]! * right[index]!;
  return sum;
}
