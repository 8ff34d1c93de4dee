/**
 * Turns texts into vectors. Implementations: the local hashing embedder (default, offline,
 * deterministic) and the HTTP embedder for OpenAI-compatible `/v1/embeddings` endpoints.
 */
export interface Embedder {
  /** Identity stored with the vectors (kind and model); a different one triggers a rebuild. */
  readonly name: string;
  readonly dimension: number;
  /** One L2-normalized vector per text, in order. */
  embed(texts: string[]): Promise<Float32Array[]>;
}

/** What is stored beside the vectors: a change of either part means every vector is rebuilt. */
export function embedderIdentity(embedder: Embedder): string {
  return `${embedder.name}/${embedder.dimension}`;
}

/** Scales a vector to unit length in place (a zero vector stays zero). */
export function normalizeInPlace(vector: Float32Array): Float32Array {
  let sum = 0;
  for (let index = 0; index < vector.length; index += 1) sum += vector[index]! * vector[index]!;
  if (sum > 0) {
    const scale = 1 / Math.sqrt(sum);
    for (let index = 0; index < vector.length; index += 1) vector[index]! *= scale;
  }
  return vector;
}

/** Dot product; equals cosine similarity for unit vectors. */
export function dot(left: Float32Array, right: Float32Array): number {
  let sum = 0;
  const length = Math.min(left.length, right.length);
  for (let index = 0; index < length; index += 1) sum += left[index]! * right[index]!;
  return sum;
}

/** Stores a vector as a BLOB of little-endian Float32 values (a copy, safe to keep). */
export function vectorToBlob(vector: Float32Array): Buffer {
  return Buffer.from(vector.buffer.slice(vector.byteOffset, vector.byteOffset + vector.byteLength));
}

export function blobToVector(blob: Buffer): Float32Array {
  // Copy into an aligned buffer: SQLite hands back Buffers at arbitrary offsets.
  const copy = new Float32Array(blob.byteLength / 4);
  new Uint8Array(copy.buffer).set(blob);
  return copy;
}
