import { normalizeInPlace, type Embedder } from './embedder.js';
import { embeddingThread } from './embedding-thread.js';
import type { HashingEmbedderOptions } from './hashing-options.js';
import { splitUnspaced } from './search-text.js';
import { fnv1a, STOP_WORDS, words } from './text.js';

export type { HashingEmbedderOptions } from './hashing-options.js';

/** Batches at least this large go to the embedding thread when `offThread` is set. */
const OFF_THREAD_MIN_BATCH = 32;

const STOP_WORD_WEIGHT = 0.1;
const TRIGRAM_WEIGHT = 0.6;

/**
 * The default embedder: feature hashing, no weights to download, deterministic across runs and
 * machines. Features are the normalized words (stop words weighted down; unspaced scripts in
 * character pairs) and the character trigrams of each padded word; each feature lands in one bucket with a sign taken from a second
 * hash (so collisions cancel on average instead of piling up), counts are dampened with
 * 1 + log(tf), and the vector is L2-normalized so a dot product is a cosine.
 */
export class HashingEmbedder implements Embedder {
  readonly name: string;
  readonly dimension: number;
  private readonly stopWordWeight: number;
  private readonly trigramWeight: number;
  private readonly offThread: boolean;

  constructor(options: HashingEmbedderOptions) {
    if (!Number.isInteger(options.dimension) || options.dimension < 8) {
      throw new RangeError(`hash embedder dimension must be an integer ≥ 8, got ${options.dimension}`);
    }
    this.dimension = options.dimension;
    this.stopWordWeight = options.stopWordWeight ?? STOP_WORD_WEIGHT;
    this.trigramWeight = options.trigramWeight ?? TRIGRAM_WEIGHT;
    this.offThread = options.offThread ?? false;
    // Other weights make other vectors: the name says so, and a change rebuilds the vectors.
    const custom = this.stopWordWeight !== STOP_WORD_WEIGHT || this.trigramWeight !== TRIGRAM_WEIGHT;
    this.name = custom ? `hash-v2-s${this.stopWordWeight}-t${this.trigramWeight}` : 'hash-v2';
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    if (this.offThread && texts.length >= OFF_THREAD_MIN_BATCH) {
      return embeddingThread().embed(
        { dimension: this.dimension, stopWordWeight: this.stopWordWeight, trigramWeight: this.trigramWeight },
        texts,
      );
    }
    return texts.map((text) => this.embedOne(text));
  }

  /** Synchronous form, for callers that batch inside one SQLite transaction. */
  embedOne(text: string): Float32Array {
    const counts = new Map<string, number>();
    const weights = new Map<string, number>();
    const add = (feature: string, weight: number): void => {
      counts.set(feature, (counts.get(feature) ?? 0) + 1);
      if (!weights.has(feature)) weights.set(feature, weight);
    };
    // Unspaced scripts (Chinese, Japanese, Thai...) count by character pairs, as full text does:
    // a whole run of them is a sentence, not a word, and would never meet a query's word.
    for (const word of words(text).flatMap((word) => splitUnspaced(word).map((piece) => piece.text))) {
      const stop = STOP_WORDS.has(word);
      add(`w:${word}`, stop ? this.stopWordWeight : 1);
      if (stop) continue;
      const padded = `^${word}$`;
      for (let start = 0; start + 3 <= padded.length; start += 1) {
        add(`g:${padded.slice(start, start + 3)}`, this.trigramWeight);
      }
    }
    const vector = new Float32Array(this.dimension);
    for (const [feature, count] of counts) {
      const hash = fnv1a(feature);
      const bucket = hash % this.dimension;
      const sign = fnv1a(feature, 0x5bd1e995) & 1 ? 1 : -1;
      vector[bucket]! += sign * weights.get(feature)! * (1 + Math.log(count));
    }
    return normalizeInPlace(vector);
  }
}
