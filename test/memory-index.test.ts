import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { DEFAULTS } from '../src/config/defaults.js';
import type { MemorySettings } from '../src/config/types.js';
import { HashingEmbedder, openMemoryStore, type Embedder, type TranscriptEntryInput } from '../src/memory/index.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { openTestDatabase } from './support/storage.js';
import { closestWindow } from './support/vector-bytes.js';

const directories: string[] = [];
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  directories.push(dir);
  return dir;
}

const TOPICS = ['sourdough starter', 'marathon training', 'kubernetes upgrade', 'birthday party', 'tax return', 'guitar lessons'];

function conversation(channelId: string, count: number): TranscriptEntryInput[] {
  return Array.from({ length: count }, (_, index) => ({
    channelId,
    messageId: `${channelId}-${index}`,
    authorId: `u${index % 3}`,
    authorName: ['Ann', 'Ben', 'Cat'][index % 3]!,
    content: `message ${index} about the ${TOPICS[index % TOPICS.length]} number ${index * 7}`,
    createdAt: 1_700_000_000_000 + index * 1000,
  }));
}

/** Opens the store of `dir`, runs `work`, closes everything; returns the events seen. */
async function withStore(
  dir: string,
  work: (store: Awaited<ReturnType<typeof openMemoryStore>>, db: SqlClient) => Promise<void>,
  options: { settings?: Partial<MemorySettings>; embedder?: Embedder; maxLoadedIndexes?: number; idleIndexMs?: number } = {},
): Promise<MagpieEvent[]> {
  const events = new EventStream();
  const seen: MagpieEvent[] = [];
  events.subscribe((event) => seen.push(event));
  const db = await openTestDatabase(dir);
  const store = await openMemoryStore({
    db,
    dataDir: dir,
    settings: { ...DEFAULTS.memory, ...options.settings },
    events,
    ...(options.embedder ? { embedder: options.embedder } : {}),
    ...(options.maxLoadedIndexes ? { maxLoadedIndexes: options.maxLoadedIndexes } : {}),
    ...(options.idleIndexMs !== undefined ? { idleIndexMs: options.idleIndexMs } : {}),
  });
  try {
    await work(store, db);
  } finally {
    await store.close();
    await db.close();
  }
  return seen;
}

const location = { channelId: 'persist' };

describe('vector index lifecycle', () => {
  test('data and index survive a restart; a deleted or corrupt index file is rebuilt from SQLite', async () => {
    const dir = freshDir();
    await withStore(dir, async (store) => {
      await store.archiveTranscript(conversation('persist', 300));
      await store.save({ location, content: 'Ben keeps the spare office key', memoryType: 'fact' });
      // Indexes load on the first search of their scope (writes alone only fill SQLite).
      await store.search({ location, query: 'anything' });
      await store.whenIndexed();
    });
    const indexDir = path.join(dir, 'index');
    const files = readdirSync(indexDir).filter((name) => name.endsWith('.hnsw'));
    assert.equal(files.length, 1);

    const check = async (store: Awaited<ReturnType<typeof openMemoryStore>>): Promise<void> => {
      const results = await store.search({ location, query: 'marathon training number 217' });
      assert.ok(results[0]!.source_ids.includes('persist-31'));
      const key = await store.search({ location, query: 'who has the spare key?' });
      assert.equal(key[0]!.content, 'Ben keeps the spare office key');
      const stats = await store.stats(location);
      assert.equal(stats.transcriptEntries, 300);
      assert.equal(stats.memories, 1);
    };

    const reopened = await withStore(dir, check);
    assert.ok(reopened.some((event) => event.type === 'memory_index_loaded' && event.points === 301));
    assert.ok(!reopened.some((event) => event.type === 'memory_index_rebuild'));

    rmSync(path.join(indexDir, files[0]!));
    const afterDelete = await withStore(dir, check);
    const rebuild = afterDelete.find((event) => event.type === 'memory_index_rebuild');
    assert.equal(rebuild?.reason, 'index file missing');
    assert.equal(rebuild?.points, 301);

    writeFileSync(path.join(indexDir, files[0]!), 'this is not an index');
    const afterCorrupt = await withStore(dir, check);
    assert.equal(afterCorrupt.find((event) => event.type === 'memory_index_rebuild')?.reason, 'index file size differs from its sidecar');

    truncateSync(path.join(indexDir, files[0]!), 1000);
    const afterTruncate = await withStore(dir, check);
    assert.ok(afterTruncate.some((event) => event.type === 'memory_index_rebuild'));

    // After the rebuild the file is trusted again.
    const settled = await withStore(dir, check);
    assert.ok(!settled.some((event) => event.type === 'memory_index_rebuild'));
  });

  test('a stale index file (older than SQLite) is caught up, and deletions made while it was unloaded apply', async () => {
    const dir = freshDir();
    await withStore(dir, async (store) => {
      await store.archiveTranscript(conversation('persist', 50));
      await store.search({ location, query: 'anything' });
      await store.whenIndexed();
    });
    // Written and deleted with the index of this channel not loaded: the saved file lags behind.
    await withStore(dir, async (store) => {
      await store.archiveTranscript([
        { channelId: 'persist', messageId: 'late', authorId: 'u9', authorName: 'Dee', content: 'the zeppelin lands at noon', createdAt: 1 },
      ]);
      await store.deleteTranscript('persist', ['persist-3']);
    });
    const events = await withStore(dir, async (store) => {
      const late = await store.search({ location, query: 'zeppelin' });
      assert.ok(late[0]!.source_ids.includes('late'));
      const gone = await store.search({ location, query: 'message 3 kubernetes upgrade number 21', limit: 20 });
      assert.ok(!gone.some((result) => result.source_ids.includes('persist-3')));
      await store.whenIndexed();
      assert.equal((await store.stats(location)).pendingVectors, 0);
      assert.equal((await store.stats(location)).indexedVectors, 50);
    });
    assert.ok(events.some((event) => event.type === 'memory_index_loaded'), 'the saved file was used, not rebuilt');
  });

  test("an edited message's old vector leaves the index file at once; the new one is indexed, and another process's tombstone for the edit keeps it", async () => {
    const dir = freshDir();
    const indexFile = () => {
      const names = readdirSync(path.join(dir, 'index')).filter((name) => name.endsWith('.hnsw'));
      assert.equal(names.length, 1);
      return readFileSync(path.join(dir, 'index', names[0]!));
    };
    const vectorOf = async (db: SqlClient, messageId: string): Promise<Float32Array> => {
      const row = (await db
        .prepare(`SELECT v.vector AS vector FROM memory_vectors v JOIN memory_items i ON i.rowid = v.item_rowid WHERE i.message_id = ?`)
        .get(messageId)) as { vector: Buffer };
      const blob = Buffer.from(row.vector);
      return new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.length));
    };
    // The old text's vector: the same conversation, embedded in a store of its own.
    const other = freshDir();
    let oldVector: Float32Array | undefined;
    let otherOld: Float32Array | undefined;
    await withStore(other, async (store, db) => {
      await store.archiveTranscript(conversation('persist', 30));
      oldVector = await vectorOf(db, 'persist-5');
      otherOld = await vectorOf(db, 'persist-9');
    });
    let after: Float32Array | undefined;
    await withStore(dir, async (store) => {
      await store.archiveTranscript(conversation('persist', 30));
      await store.search({ location, query: 'anything' });
      await store.whenIndexed();
    });
    assert.ok(closestWindow(indexFile(), oldVector!) > 0.999, 'precondition: the saved file holds the vector');
    await withStore(dir, async (store, db) => {
      await store.search({ location, query: 'anything' });
      // Two edits in one call (a delete's redacted replies come together), and an id never stored.
      await store.updateTranscript('persist', [
        { messageId: 'persist-5', content: 'nothing left of what I said' },
        { messageId: 'never-stored', content: 'ignored' },
        { messageId: 'persist-9', content: 'this one changed its mind as well' },
      ]);
      assert.ok(closestWindow(indexFile(), oldVector!) < 0.99, 'the old vector left the file at once');
      assert.ok(closestWindow(indexFile(), otherOld!) < 0.99, 'and the other edited one\'s');
      await store.whenIndexed();
      after = await vectorOf(db, 'persist-5');
      const found = await store.search({ location, query: 'nothing left of what I said', limit: 3 });
      assert.ok(found[0]!.source_ids.includes('persist-5'));
    });
    assert.ok(closestWindow(indexFile(), oldVector!) < 0.99, 'the old vector is not in the file');
    assert.ok(closestWindow(indexFile(), after!) > 0.999, 'the new vector is');
    // Another process sharing the database edited it too: its tombstone for this directory's
    // file comes after the file already holds the new vector, which must stay.
    const events = await withStore(dir, async (store, db) => {
      const key = (await db.prepare('SELECT index_key FROM memory_index_state').pluck().get()) as string;
      const label = (await db.prepare(`SELECT rowid FROM memory_items WHERE message_id = 'persist-5'`).pluck().get()) as number;
      await db.prepare('INSERT INTO memory_index_tombstones (index_key, label) VALUES (?, ?)').run(key, label);
      await store.search({ location, query: 'anything' });
      await store.whenIndexed();
      const stats = await store.stats(location);
      assert.deepEqual([stats.indexedVectors, stats.pendingVectors], [30, 0]);
    });
    assert.ok(!events.some((event) => event.type === 'memory_index_rebuild'), 'the file was used');
    assert.ok(closestWindow(indexFile(), after!) > 0.999, 'the new vector stays in the file');
  });

  test('a change of embedder rebuilds every vector from SQLite text', async () => {
    const dir = freshDir();
    await withStore(dir, async (store) => {
      await store.archiveTranscript(conversation('persist', 40));
      await store.whenIndexed();
    });
    const events = await withStore(
      dir,
      async (store) => {
        const stats = await store.stats(location);
        assert.equal(stats.dimension, 64);
        // The index is rebuilt from the new vectors first: while it catches up, the order of two
        // messages that match every word ("message 35 …", "… number 35") can follow how far it got.
        await store.search({ location, query: 'anything' });
        await store.whenIndexed();
        const results = await store.search({ location, query: 'guitar lessons number 35' });
        assert.ok(results[0]!.source_ids.includes('persist-5'));
      },
      { embedder: new HashingEmbedder({ dimension: 64 }) },
    );
    const rebuilt = events.find((event) => event.type === 'memory_vectors_rebuilt');
    assert.equal(rebuilt?.from, 'hash-v2/256');
    assert.equal(rebuilt?.to, 'hash-v2/64');
    assert.equal(rebuilt?.items, 40);
  });

  test('only a bounded number of indexes stay loaded; evicted ones are saved and reload', async () => {
    const dir = freshDir();
    const channels = Array.from({ length: 6 }, (_, index) => `room-${index}`);
    const events = await withStore(
      dir,
      async (store) => {
        for (const channelId of channels) await store.archiveTranscript(conversation(channelId, 20));
        for (const channelId of channels) {
          const results = await store.search({ location: { channelId }, query: 'sourdough starter number 42' });
          assert.ok(results[0]!.source_ids.includes(`${channelId}-6`));
        }
        for (const channelId of channels) {
          const results = await store.search({ location: { channelId }, query: 'tax return number 28' });
          assert.ok(results[0]!.source_ids.includes(`${channelId}-4`));
        }
      },
      { maxLoadedIndexes: 2 },
    );
    // Second pass: each channel's index had been evicted (saved) and was loaded back from its file.
    assert.ok(events.filter((event) => event.type === 'memory_index_loaded').length >= 4);
    assert.equal(readdirSync(path.join(dir, 'index')).filter((name) => name.endsWith('.hnsw')).length, 6);
  });

  test('an idle index is saved and dropped, and comes back from its file', async () => {
    const dir = freshDir();
    const events = await withStore(
      dir,
      async (store) => {
        await store.archiveTranscript([...conversation('north', 10), ...conversation('south', 10)]);
        await store.search({ location: { channelId: 'north' }, query: 'tax return' });
        await store.whenIndexed();
        // With no idle allowance, touching another index unloads this one (saving it first).
        await store.search({ location: { channelId: 'south' }, query: 'tax return' });
        const again = await store.search({ location: { channelId: 'north' }, query: 'tax return number 28' });
        assert.ok(again[0]!.source_ids.includes('north-4'));
      },
      { idleIndexMs: 0 },
    );
    assert.deepEqual(
      events.filter((event) => event.type === 'memory_index_loaded').map((event) => event.index_key),
      ['channel:north'],
    );
  });

  test('a deletion while a search is loading the same index from its file finishes, and the item is gone', async () => {
    const dir = freshDir();
    await withStore(dir, async (store) => {
      await store.archiveTranscript(conversation('east', 12));
      await store.search({ location: { channelId: 'east' }, query: 'tax return' });
      await store.whenIndexed();
    });
    await withStore(dir, async (store) => {
      // Both start at once: the search loads the index file, the deletion commits meanwhile.
      const [, deleted] = await Promise.all([
        store.search({ location: { channelId: 'east' }, query: 'tax return number 28' }),
        store.deleteTranscript('east', ['east-4']),
      ]);
      assert.equal(deleted, undefined);
      const after = await store.search({ location: { channelId: 'east' }, query: 'tax return number 28', limit: 20 });
      assert.ok(!after.some((result) => result.message_id === 'east-4'));
    });
  });
});
