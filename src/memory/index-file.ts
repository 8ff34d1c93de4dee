import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rename } from 'node:fs/promises';

/**
 * What an index file was built from, written next to it (`<file>.meta.json`). A file is loaded
 * only when its sidecar agrees with SQLite (`memory_index_state`) and its bytes hash to the
 * recorded checksum; otherwise the index is rebuilt from SQLite, never trusted.
 */
export interface IndexSidecar {
  format: 1;
  /** The scope key (a channel, a DM user) the index belongs to. */
  index_key: string;
  /** Embedder identity and HNSW parameters. */
  identity: string;
  dimension: number;
  /** Points ever added to the graph (deleted ones included): what hnswlib reports. */
  point_count: number;
  /** Largest `memory_vectors.seq` the file holds. */
  high_water: number;
  bytes: number;
  sha256: string;
  saved_at: string;
}

/** What the loader expects to find, from SQLite and the running embedder. */
export interface IndexExpectation {
  indexKey: string;
  identity: string;
  dimension: number;
  pointCount: number;
  highWater: number;
}

export type IndexFileCheck = { ok: true } | { ok: false; reason: string };

export function sidecarPath(file: string): string {
  return `${file}.meta.json`;
}

/**
 * Moves whatever sits at `path` out of the way (`<path>.moved-<time>`), so a directory where an
 * index file belongs, or a file where the index directory belongs, cannot stop search.
 * Returns the new name, or undefined when nothing could be moved (a read-only data dir).
 */
export function moveAside(path: string): string | undefined {
  const target = `${path}.moved-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  try {
    renameSync(path, target);
    return target;
  } catch {
    return undefined;
  }
}

/**
 * Checks an index file before hnswlib sees it. hnswlib reads graph links and sizes from the file
 * without bounds checks, so a file with an intact header and garbled contents would crash the
 * process; every byte is therefore vouched for by the checksum, and the structure is walked as
 * well (a second line of defence that needs no sidecar).
 */
export function checkIndexFile(file: string, expected: IndexExpectation): IndexFileCheck {
  let stats;
  try {
    stats = lstatSync(file);
  } catch {
    return { ok: false, reason: 'index file missing' };
  }
  if (!stats.isFile()) return { ok: false, reason: 'index path is not a regular file' };
  const sidecar = readSidecar(file);
  if (!sidecar) return { ok: false, reason: 'index sidecar missing or unreadable' };
  if (sidecar.index_key !== expected.indexKey) return { ok: false, reason: 'index file belongs to another scope' };
  if (sidecar.identity !== expected.identity) return { ok: false, reason: 'index file built with another embedder or parameters' };
  if (sidecar.dimension !== expected.dimension) return { ok: false, reason: 'index file has another dimension' };
  if (sidecar.point_count !== expected.pointCount || sidecar.high_water !== expected.highWater) {
    return { ok: false, reason: 'index sidecar disagrees with the database' };
  }
  if (stats.size !== sidecar.bytes) return { ok: false, reason: 'index file size differs from its sidecar' };
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch {
    return { ok: false, reason: 'index file unreadable' };
  }
  if (sha256(bytes) !== sidecar.sha256) return { ok: false, reason: 'index file checksum mismatch' };
  const structure = validateHnswBytes(bytes, expected.dimension);
  if (structure) return { ok: false, reason: `index file malformed: ${structure}` };
  if (hnswPointCount(bytes) !== expected.pointCount) return { ok: false, reason: 'index file point count differs' };
  return { ok: true };
}

/**
 * Makes sure the index directory is a directory: anything else there is moved aside (a writer)
 * or makes the directory unusable for this run (a reader, which never writes).
 */
export function prepareIndexDirectory(directory: string, options: { readOnly: boolean }): { usable: boolean; problem?: string; movedTo?: string } {
  let stats;
  try {
    stats = lstatSync(directory);
  } catch {
    stats = undefined;
  }
  if (stats && !stats.isDirectory()) {
    const movedTo = options.readOnly ? undefined : moveAside(directory);
    if (!movedTo) return { usable: false, problem: 'not a directory' };
    mkdirSync(directory, { recursive: true });
    return { usable: true, problem: 'not a directory', movedTo };
  }
  if (!options.readOnly) mkdirSync(directory, { recursive: true });
  return { usable: true };
}

/**
 * Writes an index file and its sidecar under temporary names, then renames both into place
 * (the index first: a crash between leaves a checksum mismatch, which is detected). `write` and
 * `digest` do the heavy part (a large index is a hundred megabytes) away from the event loop.
 * Throws when anything fails (a full disk), leaving no temporary file behind.
 */
export async function saveIndexFile(
  file: string,
  write: (path: string) => Promise<void>,
  digest: (path: string) => Promise<FileDigest>,
  info: Omit<IndexSidecar, 'format' | 'bytes' | 'sha256' | 'saved_at'>,
): Promise<void> {
  const temporary = `${file}.tmp`;
  const sidecarTemporary = `${sidecarPath(file)}.tmp`;
  try {
    await write(temporary);
    writeSidecarOf(file, info, await digest(temporary));
    if (existsSync(file) && !lstatSync(file).isFile()) moveAside(file);
    // On the thread pool: replacing a file of a hundred megabytes frees its blocks, which took
    // 20–40 ms of the event loop as a synchronous rename.
    await rename(temporary, file);
    await rename(sidecarTemporary, sidecarPath(file));
  } catch (error) {
    rmSync(temporary, { force: true });
    rmSync(sidecarTemporary, { force: true });
    throw error;
  }
}

/** Records what a freshly written index file holds; written to a temporary name first. */
export function writeSidecar(file: string, written: string, info: Omit<IndexSidecar, 'format' | 'bytes' | 'sha256' | 'saved_at'>): string {
  return writeSidecarOf(file, info, describeFile(written));
}

/** A written file's size and SHA-256, what its sidecar records. */
export interface FileDigest {
  bytes: number;
  sha256: string;
}

export function describeFile(path: string): FileDigest {
  const bytes = readFileSync(path);
  return { bytes: bytes.length, sha256: sha256(bytes) };
}

/** Writes the sidecar of `file` under a temporary name (see `writeSidecar`) from a digest made already. */
export function writeSidecarOf(file: string, info: Omit<IndexSidecar, 'format' | 'bytes' | 'sha256' | 'saved_at'>, digest: FileDigest): string {
  const sidecar: IndexSidecar = { format: 1, ...info, ...digest, saved_at: new Date().toISOString() };
  const temporary = `${sidecarPath(file)}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(sidecar)}\n`);
  return temporary;
}

/** Removes an index file and its sidecar (a directory in their place is moved aside instead). */
export function removeIndexFile(file: string): void {
  for (const path of [file, sidecarPath(file)]) {
    if (!existsSync(path)) continue;
    try {
      if (lstatSync(path).isDirectory()) moveAside(path);
      else rmSync(path, { force: true });
    } catch {
      // Left behind: the next load checks it again and will not trust it.
    }
  }
}

function readSidecar(file: string): IndexSidecar | undefined {
  try {
    const parsed = JSON.parse(readFileSync(sidecarPath(file), 'utf8')) as Partial<IndexSidecar>;
    if (parsed.format !== 1 || typeof parsed.sha256 !== 'string' || typeof parsed.bytes !== 'number') return undefined;
    return parsed as IndexSidecar;
  } catch {
    return undefined;
  }
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

const HEADER_BYTES = 96;
/** hnswlib keeps a node's neighbour count in 16 bits of its list header. */
const MAX_LIST_COUNT = 0xffff;

function hnswPointCount(bytes: Buffer): number {
  return Number(bytes.readBigUInt64LE(16));
}

/**
 * Walks an hnswlib (0.8) index file as `HierarchicalNSW::loadIndex` would read it and returns
 * what is wrong with it, or undefined when every size, count, neighbour id and vector is sane.
 */
export function validateHnswBytes(bytes: Buffer, dimension: number): string | undefined {
  if (bytes.length < HEADER_BYTES) return 'shorter than its header';
  const size = (offset: number): number => {
    const value = bytes.readBigUInt64LE(offset);
    return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.NaN : Number(value);
  };
  const offsetLevel0 = size(0);
  const maxElements = size(8);
  const count = size(16);
  const dataPerElement = size(24);
  const labelOffset = size(32);
  const offsetData = size(40);
  const maxLevel = bytes.readInt32LE(48);
  const enterPoint = bytes.readUInt32LE(52);
  const maxM = size(56);
  const maxM0 = size(64);
  const m = size(72);
  const mult = bytes.readDoubleLE(80);
  if (offsetLevel0 !== 0) return 'bad level-0 offset';
  if (!(count <= maxElements)) return 'more points than capacity';
  if (!(m >= 2 && maxM === m && maxM0 === 2 * m && maxM0 <= MAX_LIST_COUNT)) return 'bad graph degree';
  if (!Number.isFinite(mult) || mult <= 0) return 'bad level multiplier';
  const linksLevel0 = maxM0 * 4 + 4;
  const linksPerLevel = maxM * 4 + 4;
  const dataBytes = dimension * 4;
  if (offsetData !== linksLevel0 || labelOffset !== linksLevel0 + dataBytes || dataPerElement !== linksLevel0 + dataBytes + 8) {
    return 'element layout does not match the dimension';
  }
  if (count === 0) return bytes.length === HEADER_BYTES ? undefined : 'trailing bytes';
  if (!(maxLevel >= 0 && maxLevel < 64) || enterPoint >= count) return 'bad entry point';
  const level0Bytes = count * dataPerElement;
  if (HEADER_BYTES + level0Bytes > bytes.length) return 'truncated level 0';
  // Typed views read the file fast (every section is 4-byte aligned); copy once if the buffer is not.
  const aligned = bytes.byteOffset % 4 === 0 ? bytes : Buffer.from(bytes);
  const words = new Uint32Array(aligned.buffer, aligned.byteOffset, Math.floor(aligned.length / 4));
  const floats = new Float32Array(aligned.buffer, aligned.byteOffset, Math.floor(aligned.length / 4));
  const labels = new Set<number>();
  for (let element = 0; element < count; element += 1) {
    const base = HEADER_BYTES + element * dataPerElement;
    const problem = checkList(words, base / 4, maxM0, count);
    if (problem) return `point ${element}: ${problem}`;
    let norm = 0;
    const first = (base + offsetData) / 4;
    for (let component = first; component < first + dimension; component += 1) norm += floats[component]! * floats[component]!;
    // Cosine indexes hold unit vectors (or zero ones, for empty text); NaN fails this too.
    if (!(norm <= 1.01)) return `point ${element}: vector is not normalized`;
    const low = words[(base + labelOffset) / 4]!;
    const high = words[(base + labelOffset) / 4 + 1]!;
    if (high >= 0x200000) return `point ${element}: bad label`;
    const label = high * 0x100000000 + low;
    if (labels.has(label)) return `point ${element}: duplicate label`;
    labels.add(label);
  }
  let offset = HEADER_BYTES + level0Bytes;
  let enterLevel = 0;
  for (let element = 0; element < count; element += 1) {
    if (offset + 4 > bytes.length) return 'truncated upper levels';
    const listBytes = bytes.readUInt32LE(offset);
    offset += 4;
    if (listBytes % linksPerLevel !== 0) return `point ${element}: bad upper-level size`;
    const levels = listBytes / linksPerLevel;
    if (levels > maxLevel) return `point ${element}: level above the graph's top`;
    if (offset + listBytes > bytes.length) return 'truncated upper levels';
    for (let level = 0; level < levels; level += 1) {
      const problem = checkList(words, (offset + level * linksPerLevel) / 4, maxM, count);
      if (problem) return `point ${element} level ${level + 1}: ${problem}`;
    }
    if (element === enterPoint) enterLevel = levels;
    offset += listBytes;
  }
  if (offset !== bytes.length) return 'trailing bytes';
  if (enterLevel !== maxLevel) return 'entry point is not on the top level';
  return undefined;
}

/** One neighbour list at word `at`: a 16-bit count, a deleted flag, then neighbour ids. */
function checkList(words: Uint32Array, at: number, capacity: number, count: number): string | undefined {
  const header = words[at]!;
  const neighbours = header & 0xffff;
  if (neighbours > capacity) return 'too many neighbours';
  if (header >>> 16 > 0x01) return 'bad list flags';
  for (let index = at + 1; index <= at + neighbours; index += 1) {
    if (words[index]! >= count) return 'neighbour out of range';
  }
  return undefined;
}
