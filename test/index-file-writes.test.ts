/**
 * Index files are read and written off the event loop (hnswlib's thread pool, and a thread of
 * Magpie's own for checksums and the structure walk). While hnswlib writes an index, nothing may
 * change it; deletes, catch-up and searches that come meanwhile wait for the write or go on
 * beside it, and what ends up on disk is exactly what the database says.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { HashingEmbedder, openMemoryStore, type TranscriptEntryInput } from '../src/memory/index.js';
import { DEFAULT_HNSW_PARAMS, HnswVectorIndex } from '../src/memory/vector-index.js';
import { openTestDatabase } from './support/storage.js';
import { closestWindow } from './support/vector-bytes.js';

const directories: string[] = [];
after(() => {
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});

function freshDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-index-writes-'));
  directories.push(dir);
  return dir;
}

const embedder = new HashingEmbedder({ dimension: DEFAULTS.memory.hashDimension });

const WORDS = ['ferry', 'bakery', 'library', 'garage', 'orchard', 'harbour', 'violin', 'glacier', 'tandem', 'quarry', 'meadow', 'lantern', 'compass', 'saddle', 'pepper', 'walnut', 'canyon', 'falcon', 'marble', 'thistle'];

/** Messages with words of their own (three of twenty, by the index), so no two share a vector. */
function lines(channelId: string, from: number, count: number): TranscriptEntryInput[] {
  return Array.from({ length: count }, (_, offset) => {
    const index = from + offset;
    const words = [WORDS[index % 20]!, WORDS[Math.floor(index / 20) % 20]!, WORDS[(index * 7 + 3) % 20]!];
    return {
      channelId,
      messageId: `${channelId}-${index}`,
      authorId: `u${index % 4}`,
      authorName: ['Ann', 'Ben', 'Cat', 'Dov'][index % 4]!,
      content: `note ${index}: ${words.join(' ')} ${String(index * 7919).padStart(6, '0')}`,
      createdAt: 1_700_000_000_000 + index * 1000,
    };
  });
}

describe('index files written off the event loop', () => {
  test('while hnswlib writes an index nothing changes it; the file then holds what it held', async () => {
    const dir = freshDir();
    const index = HnswVectorIndex.create({ dimension: embedder.dimension, params: DEFAULT_HNSW_PARAMS, capacity: 64 });
    const texts = lines('c', 0, 300).map((line) => line.content);
    texts.forEach((text, label) => index.add(label + 1, embedder.embedOne(text)));
    const file = path.join(dir, 'a.hnsw');
    const writing = index.save(file);
    assert.equal(index.busy, true, 'the write runs on another thread');
    assert.throws(() => index.add(999, embedder.embedOne('late')), /being written/);
    assert.throws(() => index.remove(1), /being written/);
    // A search may run beside the write.
    assert.equal(index.search(embedder.embedOne(texts[10]!), 1)[0]?.label, 11);
    while (index.busy) await index.idle();
    await writing;
    index.add(999, embedder.embedOne('late'));
    const loaded = await HnswVectorIndex.load({ dimension: embedder.dimension, params: DEFAULT_HNSW_PARAMS, file });
    assert.equal(loaded.pointCount, 300, 'the file holds what the index held when the write began');
    assert.equal(loaded.search(embedder.embedOne(texts[42]!), 1)[0]?.label, 43);
  });

  test('deletes, new messages and searches arriving while index files are written: the files end up as the database says', async () => {
    const dir = freshDir();
    const events: MagpieEvent[] = [];
    const stream = new EventStream();
    stream.subscribe((event) => events.push(event));
    const open = async () => {
      const db = await openTestDatabase(dir);
      const store = await openMemoryStore({ db, dataDir: dir, settings: { ...DEFAULTS.memory }, events: stream, maxLoadedIndexes: 1 });
      return { store, close: async () => (await store.close(), await db.close()) };
    };
    const gone = ['west-3', 'west-17', 'west-41', 'west-99', 'west-150'];
    const first = await open();
    try {
      await first.store.archiveTranscript(lines('west', 0, 200));
      await first.store.archiveTranscript(lines('east', 0, 50));
      await first.store.search({ location: { channelId: 'west' }, query: 'ferry code' });
      await first.store.whenIndexed();
      // Each delete saves the index file; they come together with ingest, searches that load and
      // evict the other channel's index (at most one stays loaded), and more deletes.
      await Promise.all([
        ...gone.map((messageId) => first.store.deleteTranscript('west', [messageId])),
        first.store.archiveTranscript(lines('west', 200, 40)),
        first.store.search({ location: { channelId: 'east' }, query: 'bakery code' }),
        first.store.search({ location: { channelId: 'west' }, query: 'library code' }),
        first.store.search({ location: { channelId: 'east' }, query: 'garage code' }),
      ]);
      await first.store.whenIndexed();
    } finally {
      await first.close();
    }
    assert.ok(!events.some((event) => event.type === 'memory_index_save_failed'), JSON.stringify(events.filter((event) => event.type === 'memory_index_save_failed')));

    // Every deleted message's vector is gone from the files; each file is trusted at the next start.
    const indexDir = path.join(dir, 'index');
    const names = readdirSync(indexDir).filter((name) => name.endsWith('.hnsw'));
    assert.equal(names.length, 2, 'one file per channel');
    // East's lines read as west's do (the same generator): only west's own file is searched.
    const files = names.filter((name) => name.startsWith('channel_west')).map((name) => readFileSync(path.join(indexDir, name)));
    assert.equal(files.length, 1);
    for (const messageId of gone) {
      const line = lines('west', Number(messageId.split('-')[1]), 1)[0]!;
      const vector = embedder.embedOne(`${line.authorName}: ${line.content}`);
      for (const bytes of files) assert.ok(closestWindow(bytes, vector) < 0.9, `no copy of ${messageId}'s vector on disk`);
    }
    events.length = 0;
    const second = await open();
    try {
      for (const [channelId, query, expected] of [
        ['west', 'note 230', 'west-230'],
        ['west', 'note 58', 'west-58'],
        ['east', 'note 21', 'east-21'],
      ] as const) {
        const results = await second.store.search({ location: { channelId }, query });
        assert.equal(results[0]?.message_id, expected, query);
      }
      for (const messageId of gone) {
        const number = messageId.split('-')[1];
        const results = await second.store.search({ location: { channelId: 'west' }, query: `note ${number}`, limit: 20 });
        assert.ok(!results.some((result) => result.message_id === messageId), `${messageId} is not found`);
      }
    } finally {
      await second.close();
    }
    assert.deepEqual(
      events.filter((event) => event.type === 'memory_index_rebuild').map((event) => event.index_key),
      [],
      'the files were trusted: no index was rebuilt',
    );
    assert.ok(events.some((event) => event.type === 'memory_index_loaded'));
  });
  test('a delete while its channel index is on its way to its first file: the point leaves that file too', async () => {
    const dir = freshDir();
    const db = await openTestDatabase(dir);
    const store = await openMemoryStore({ db, dataDir: dir, settings: { ...DEFAULTS.memory }, maxLoadedIndexes: 1 });
    const rounds = 6;
    try {
      await store.archiveTranscript(lines('other', 0, 30));
      for (let round = 0; round < rounds; round += 1) {
        const channelId = `room${round}`;
        await store.archiveTranscript(lines(channelId, 0, 40));
        // Built in memory only (far fewer points than a save needs): no file of it yet.
        await store.search({ location: { channelId }, query: 'note 1' });
        await store.whenIndexed();
        // The search loads another index and evicts this one, whose first save then runs in the
        // background, while the delete commits.
        await Promise.all([store.search({ location: { channelId: 'other' }, query: 'note 2' }), store.deleteTranscript(channelId, [`${channelId}-3`])]);
      }
      await store.whenIndexed();
    } finally {
      await store.close();
      await db.close();
    }
    const indexDir = path.join(dir, 'index');
    for (let round = 0; round < rounds; round += 1) {
      const line = lines(`room${round}`, 3, 1)[0]!;
      const vector = embedder.embedOne(`${line.authorName}: ${line.content}`);
      const name = readdirSync(indexDir).find((file) => file.startsWith(`channel_room${round}-`) && file.endsWith('.hnsw'));
      assert.ok(name, `room${round} has an index file`);
      assert.ok(closestWindow(readFileSync(path.join(indexDir, name)), vector) < 0.9, `room${round}: no copy of the deleted message's vector`);
    }
  });
});
