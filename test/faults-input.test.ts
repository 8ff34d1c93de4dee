/** Garbage fed to the entry points added for faults: catch-up config keys, replay flags, the index sidecar. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { checkConfigText } from '../src/config/index.js';
import { checkIndexFile } from '../src/memory/index-file.js';
import { projectRoot, runMagpie } from './support/magpie-process.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-faults-input-'));
after(() => rmSync(root, { recursive: true, force: true }));

describe('garbage in the fault-handling entry points', () => {
  it('catch-up keys out of range or of the wrong type are refused, naming the key', () => {
    for (const [text, key] of [
      ['[discord]\ncatch_up_channels = -1\n', 'discord.catch_up_channels'],
      ['[discord]\ncatch_up_channels = "many"\n', 'discord.catch_up_channels'],
      ['[discord]\ncatch_up_channels = 1.5\n', 'discord.catch_up_channels'],
      ['[discord]\ncatch_up_messages = 0\n', 'discord.catch_up_messages'],
      ['[discord]\ncatch_up_messages = 20000\n', 'discord.catch_up_messages'],
      ['[discord]\ncatch_up_message = 10\n', 'discord.catch_up_message'],
    ] as const) {
      const result = checkConfigText(text);
      assert.equal(result.ok, false, text);
      assert.ok(!result.ok && result.problems.some((problem) => problem.path === key), `${text}: ${JSON.stringify(!result.ok && result.problems)}`);
    }
    assert.equal(checkConfigText('[discord]\ncatch_up_channels = 0\ncatch_up_messages = 10000\n').ok, true);
  });

  it('--accept-invalid-utf8 takes no value', async () => {
    const transcript = path.join(root, 't.jsonl');
    writeFileSync(transcript, '{"id":"1","channel":"c","author":"a","content":"x"}\n');
    const run = await runMagpie(['replay', transcript, '--data-dir', path.join(root, 'd'), '--accept-invalid-utf8=yes'], {
      cwd: projectRoot(),
      env: { PATH: process.env.PATH ?? '' },
    });
    assert.equal(run.code, 2);
    assert.match(run.stderr, /accept-invalid-utf8/);
  });

  it('a sidecar that is garbage, or that names other contents, means the file is not trusted', () => {
    const file = path.join(root, 'x.hnsw');
    writeFileSync(file, Buffer.alloc(96));
    const expected = { indexKey: 'k', identity: 'i', dimension: 4, pointCount: 0, highWater: 0 };
    assert.deepEqual(checkIndexFile(file, expected), { ok: false, reason: 'index sidecar missing or unreadable' });
    for (const [sidecar, reason] of [
      ['not json', 'index sidecar missing or unreadable'],
      ['{"format":2}', 'index sidecar missing or unreadable'],
      [JSON.stringify({ format: 1, index_key: 'other', identity: 'i', dimension: 4, point_count: 0, high_water: 0, bytes: 96, sha256: 'x' }), 'index file belongs to another scope'],
      [JSON.stringify({ format: 1, index_key: 'k', identity: 'j', dimension: 4, point_count: 0, high_water: 0, bytes: 96, sha256: 'x' }), 'index file built with another embedder or parameters'],
      [JSON.stringify({ format: 1, index_key: 'k', identity: 'i', dimension: 4, point_count: 3, high_water: 0, bytes: 96, sha256: 'x' }), 'index sidecar disagrees with the database'],
      [JSON.stringify({ format: 1, index_key: 'k', identity: 'i', dimension: 4, point_count: 0, high_water: 0, bytes: 95, sha256: 'x' }), 'index file size differs from its sidecar'],
      [JSON.stringify({ format: 1, index_key: 'k', identity: 'i', dimension: 4, point_count: 0, high_water: 0, bytes: 96, sha256: 'x' }), 'index file checksum mismatch'],
    ] as const) {
      writeFileSync(`${file}.meta.json`, sidecar);
      assert.deepEqual(checkIndexFile(file, expected), { ok: false, reason }, sidecar);
    }
  });
});
