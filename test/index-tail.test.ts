import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { blobToVector, embedderIdentity } from '../src/memory/embedder.js';
import { HashingEmbedder, openMemoryStore, type TranscriptEntryInput } from '../src/memory/index.js';
import { VectorIndexManager } from '../src/memory/index-manager.js';
import { DEFAULT_HNSW_PARAMS } from '../src/memory/vector-index.js';
import { openTestDatabase } from './support/storage.js';

const directories: string[] = [];
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-tail-'));
  directories.push(dir);
  return dir;
}

function messages(from: number, count: number): TranscriptEntryInput[] {
  return Array.from({ length: count }, (_, offset) => ({
    channelId: 'tail',
    messageId: `tail-${from + offset}`,
    authorId: 'u1',
    authorName: 'Ann',
    content: `note ${from + offset}: the ${['ferry', 'budget', 'garden', 'server'][(from + offset) % 4]} item ${(from + offset) * 13}`,
    createdAt: 1_700_000_000_000 + (from + offset) * 1000,
  }));
}

// A manager of its own over a fresh index directory sees every stored vector as its tail, as a
// rebuild does; searches made without yielding to the event loop keep that tail long.
test('a long tail kept between searches follows new vectors and deletions', async () => {
  const dir = freshDir();
  const db = await openTestDatabase(dir);
  const store = await openMemoryStore({ db, dataDir: dir, settings: DEFAULTS.memory });
  try {
    await store.archiveTranscript(messages(0, 400));
    await store.whenIndexed();
    const embedder = new HashingEmbedder({ dimension: DEFAULTS.memory.hashDimension });
    const manager = new VectorIndexManager({
      db,
      directory: path.join(freshDir(), 'index'),
      dimension: embedder.dimension,
      embedderIdentity: embedderIdentity(embedder),
      params: DEFAULT_HNSW_PARAMS,
      readOnly: true,
    });
    const vectorOf = async (messageId: string): Promise<{ label: number; key: string; vector: Float32Array }> => {
      const row = (await db
        .prepare('SELECT v.item_rowid AS label, v.index_key AS key, v.vector FROM memory_vectors v JOIN memory_items i ON i.rowid = v.item_rowid WHERE i.message_id = ?')
        .get(messageId)) as { label: number; key: string; vector: Buffer };
      return { label: row.label, key: row.key, vector: blobToVector(row.vector) };
    };

    // Not the newest one: its deletion leaves the newest `seq` where it was.
    const target = await vectorOf('tail-398');
    const first = await manager.search(target.key, target.vector, 5);
    assert.equal(first[0]!.label, target.label);
    assert.ok(first[0]!.similarity > 0.999);

    // Deleted: its vector leaves the kept tail with it.
    await db.prepare('DELETE FROM memory_vectors WHERE item_rowid = ?').run(target.label);
    await manager.applyDeleted(target.key, [target.label]);
    const afterDeletion = await manager.search(target.key, target.vector, 5);
    assert.ok(!afterDeletion.some((hit) => hit.label === target.label));

    // Written after the tail was kept: the target vector is seen at once.
    await store.archiveTranscript(messages(400, 1));
    await store.whenIndexed();
    const added = await vectorOf('tail-400');
    const found = await manager.search(added.key, added.vector, 5);
    assert.equal(found[0]!.label, added.label);
    await manager.close();
  } finally {
    await store.close();
    await db.close();
  }
});
