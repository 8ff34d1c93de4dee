/**
 * Index files that cannot hurt: whatever sits under `<data_dir>/index/` (a garbled graph,
 * garbled vectors, another channel's file, a directory, a file where the directory belongs),
 * `magpie memory search` answers from SQLite, finds every message and never crashes; the next
 * writer rebuilds a trustworthy index.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { validateHnswBytes } from '../src/memory/index-file.js';
import { projectRoot, runMagpie } from './support/magpie-process.js';

const CHANNELS = ['111', '222'];
const PER_CHANNEL = 150;
const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-index-faults-'));
const transcript = path.join(root, 'transcript.jsonl');
const queries = path.join(root, 'queries.jsonl');
const pristine = path.join(root, 'pristine');
const env = { PATH: process.env.PATH ?? '' };

function codeword(channel: string, index: number): string {
  return `q${channel}x${index}z`;
}

before(async () => {
  const lines: string[] = [];
  const asked: string[] = [];
  for (const channel of CHANNELS) {
    for (let index = 0; index < PER_CHANNEL; index += 1) {
      lines.push(JSON.stringify({ id: `${channel}-${index}`, channel, author: 'ann', content: `note ${index} says ${codeword(channel, index)} about the garden` }));
      asked.push(JSON.stringify({ id: `${channel}-${index}`, channel, query: codeword(channel, index), limit: 3 }));
    }
  }
  writeFileSync(transcript, `${lines.join('\n')}\n`);
  writeFileSync(queries, `${asked.join('\n')}\n`);
  const run = await runMagpie(['replay', transcript, '--data-dir', pristine, '--json'], { cwd: projectRoot(), env });
  assert.equal(run.code, 0, run.stderr);
  assert.equal(indexFiles(pristine).length, CHANNELS.length, 'replay leaves one saved index per channel');
});

after(() => rmSync(root, { recursive: true, force: true }));

function indexFiles(dataDir: string): string[] {
  return readdirSync(path.join(dataDir, 'index'))
    .filter((name) => name.endsWith('.hnsw'))
    .sort()
    .map((name) => path.join(dataDir, 'index', name));
}

let copies = 0;
function copyOfPristine(): string {
  copies += 1;
  const dir = path.join(root, `case-${copies}`);
  cpSync(pristine, dir, { recursive: true });
  return dir;
}

/** Every codeword is found, as the top hit, by one real `magpie memory search` process. */
async function assertSearchFindsEverything(dataDir: string): Promise<string> {
  const run = await runMagpie(['memory', 'search', '--data-dir', dataDir, '--queries', queries, '--json'], { cwd: projectRoot(), env });
  assert.equal(run.code, 0, `search exits cleanly (no crash): ${run.stderr}`);
  const answers = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as { id: string; results: Array<{ source_ids: string[] }> });
  assert.equal(answers.length, CHANNELS.length * PER_CHANNEL);
  for (const answer of answers) {
    assert.ok(answer.results[0]?.source_ids.includes(answer.id), `query ${answer.id} finds its message first`);
  }
  return run.stderr;
}

/** The next writer leaves a valid index behind, and readers trust it again. */
async function assertRebuiltByWriter(dataDir: string): Promise<void> {
  const rerun = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env });
  assert.equal(rerun.code, 0, rerun.stderr);
  for (const file of indexFiles(dataDir)) {
    assert.ok(statSync(file).isFile());
    assert.equal(validateHnswBytes(readFileSync(file), 256), undefined, `${file} is a sound index`);
  }
  const stderr = await assertSearchFindsEverything(dataDir);
  assert.doesNotMatch(stderr, /warning/, 'the rebuilt index is trusted');
}

/** Rewrites parts of each point of an hnswlib file, leaving its header intact. */
function garble(file: string, part: 'graph' | 'vectors'): void {
  const bytes = readFileSync(file);
  const count = Number(bytes.readBigUInt64LE(16));
  const perElement = Number(bytes.readBigUInt64LE(24));
  const offsetData = Number(bytes.readBigUInt64LE(40));
  const maxM0 = Number(bytes.readBigUInt64LE(64));
  for (let element = 0; element < count; element += 1) {
    const base = 96 + element * perElement;
    if (part === 'graph') {
      bytes.writeUInt16LE(maxM0, base);
      for (let slot = 0; slot < maxM0; slot += 1) bytes.writeUInt32LE(0x7ffffff0 + slot, base + 4 + slot * 4);
    } else {
      for (let offset = base + offsetData; offset < base + offsetData + 256 * 4; offset += 4) bytes.writeUInt32LE(0x7fc00000 + element, offset);
    }
  }
  writeFileSync(file, bytes);
}

describe('damaged index files', { timeout: 300_000 }, () => {
  test('a garbled graph (header intact) would crash hnswlib; search answers from SQLite instead, and a writer rebuilds it', async () => {
    const dir = copyOfPristine();
    const [file] = indexFiles(dir);
    garble(file!, 'graph');
    // The same file handed straight to hnswlib takes the process down: what Magpie must avoid.
    const probe = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `import h from 'hnswlib-node'; const i = new h.HierarchicalNSW('cosine', 256); i.readIndexSync(${JSON.stringify(file)});
         for (let n = 0; n < 20; n += 1) i.searchKnn(Array.from({ length: 256 }, () => Math.random()), 5);`,
      ],
      { cwd: projectRoot(), encoding: 'utf8' },
    );
    assert.ok(probe.signal !== null || probe.status !== 0, 'raw hnswlib does not survive the garbled graph');
    const stderr = await assertSearchFindsEverything(dir);
    assert.match(stderr, /vector index of .* was not used \(index file checksum mismatch\)/);
    await assertRebuiltByWriter(dir);
  });

  test('garbled vectors are not trusted', async () => {
    const dir = copyOfPristine();
    for (const file of indexFiles(dir)) garble(file, 'vectors');
    const stderr = await assertSearchFindsEverything(dir);
    assert.match(stderr, /checksum mismatch/);
    await assertRebuiltByWriter(dir);
  });

  test("another channel's index file (with or without its sidecar) is not trusted", async () => {
    const swapped = copyOfPristine();
    const [first, second] = indexFiles(swapped);
    cpSync(second!, first!);
    cpSync(`${second!}.meta.json`, `${first!}.meta.json`);
    assert.match(await assertSearchFindsEverything(swapped), /belongs to another scope/);
    await assertRebuiltByWriter(swapped);

    const fileOnly = copyOfPristine();
    const [one, two] = indexFiles(fileOnly);
    cpSync(two!, one!);
    assert.match(await assertSearchFindsEverything(fileOnly), /checksum mismatch/);
    await assertRebuiltByWriter(fileOnly);
  });

  test('a directory in place of an index file, and a file in place of the index directory, are moved aside', async () => {
    const directory = copyOfPristine();
    const [file] = indexFiles(directory);
    rmSync(file!);
    mkdirSync(file!);
    assert.match(await assertSearchFindsEverything(directory), /not a regular file/);
    await assertRebuiltByWriter(directory);
    assert.ok(readdirSync(path.join(directory, 'index')).some((name) => name.includes('.hnsw.moved-')), 'the directory was moved aside');

    const notDirectory = copyOfPristine();
    rmSync(path.join(notDirectory, 'index'), { recursive: true });
    writeFileSync(path.join(notDirectory, 'index'), 'not a directory');
    assert.match(await assertSearchFindsEverything(notDirectory), /index is not a directory; ignored/);
    await assertRebuiltByWriter(notDirectory);
    assert.ok(readdirSync(notDirectory).some((name) => name.startsWith('index.moved-')), 'the file was moved aside');
  });
});

describe('the structure walk (a second line of defence that needs no sidecar)', () => {
  test('names what is wrong with a garbled graph, garbled vectors, a short file or another dimension', () => {
    const [file] = indexFiles(pristine);
    const sound = readFileSync(file!);
    assert.equal(validateHnswBytes(sound, 256), undefined);
    assert.match(validateHnswBytes(sound, 128) ?? '', /layout does not match the dimension/);
    assert.match(validateHnswBytes(sound.subarray(0, sound.length - 10), 256) ?? '', /truncated|trailing/);
    assert.match(validateHnswBytes(sound.subarray(0, 50), 256) ?? '', /shorter than its header/);

    const copy = path.join(root, 'walk.hnsw');
    for (const [part, expected] of [
      ['graph', /point 0: (too many neighbours|neighbour out of range)/],
      ['vectors', /point 0: vector is not normalized/],
    ] as const) {
      writeFileSync(copy, sound);
      garble(copy, part);
      assert.match(validateHnswBytes(readFileSync(copy), 256) ?? '', expected);
    }
    const badLevel = Buffer.from(sound);
    badLevel.writeInt32LE(70, 48);
    assert.match(validateHnswBytes(badLevel, 256) ?? '', /bad entry point/);
  });
});
