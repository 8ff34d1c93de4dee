/** Looking for a vector in raw bytes (index files, database files), as an attacker with the disk would. */

/** The best cosine between `vector` and any float32 window of `bytes` at 4-byte alignment. */
export function closestWindow(bytes: Buffer, vector: Float32Array): number {
  const dimension = vector.length;
  const floats = new Float32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.length / 4));
  let norm = 0;
  for (const value of vector) norm += value * value;
  let best = 0;
  for (let start = 0; start + dimension <= floats.length; start += 1) {
    let dotProduct = 0;
    let windowNorm = 0;
    for (let index = 0; index < dimension; index += 1) {
      const value = floats[start + index]!;
      if (!Number.isFinite(value)) {
        windowNorm = 0;
        break;
      }
      dotProduct += value * vector[index]!;
      windowNorm += value * value;
    }
    if (windowNorm === 0) continue;
    best = Math.max(best, dotProduct / Math.sqrt(norm * windowNorm));
  }
  return best;
}
