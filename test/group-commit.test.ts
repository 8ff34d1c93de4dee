/**
 * A group commit writes its whole group at once (on PostgreSQL in a few multi-row statements),
 * yet keeps the per-message contract: a message already held rejects alone, every other one is
 * stored with its transcript row, and the vectors that follow skip a row edited meanwhile. On
 * PostgreSQL two groups are written at once, and their outcomes are still told in order. A group
 * held back before it was sent (the writer lock unconfirmed) fails whole, not once per write.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HistoryStore } from '../src/channel/history-store.js';
import { IngestWriter } from '../src/channel/ingest-writer.js';
import type { HistoryEntry } from '../src/context/types.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { HashingEmbedder, openMemoryStore, type Embedder } from '../src/memory/index.js';
import { MagpieError } from '../src/common/errors.js';
import { GroupCommit } from '../src/storage/group-commit.js';
import { WRITES_HELD } from '../src/storage/sql-client.js';
import { tempDir } from './compaction-support.js';
import { openTestDatabase, TEST_STORAGE } from './support/storage.js';
import { waitUntil } from './support/wait-until.js';

function message(channel: number, index: number): HistoryEntry {
  return {
    seq: index + 1,
    channelId: `gc-${channel}`,
    messageId: `gc-${channel}-${index}`,
    kind: 'message',
    role: 'user',
    authorId: 'u1',
    authorName: 'ann',
    content: `note ${index} of channel ${channel}: the ferry leaves at nine`,
    createdAt: 1_000 + index,
    tokens: 12,
    turnId: index + 1,
  };
}

/** The hashing embedder behind a gate: each batch waits until `open()` is called. */
class GatedEmbedder implements Embedder {
  private readonly inner = new HashingEmbedder({ dimension: 64 });
  readonly name = this.inner.name;
  readonly dimension = this.inner.dimension;
  private gate: Promise<void> = Promise.resolve();
  private release: (() => void) | undefined;
  waiting: Promise<void> | undefined;
  private arrived: (() => void) | undefined;

  hold(): void {
    this.gate = new Promise((resolve) => (this.release = resolve));
    this.waiting = new Promise((resolve) => (this.arrived = resolve));
  }

  open(): void {
    this.release?.();
    this.gate = Promise.resolve();
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    this.arrived?.();
    await this.gate;
    return this.inner.embed(texts);
  }
}

test('a group of messages is stored whole; one already held rejects alone', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const memory = await openMemoryStore({ db, dataDir: dir.path, settings: DEFAULTS.memory, embedder: new HashingEmbedder({ dimension: 64 }) });
  try {
    const store = new HistoryStore(db);
    const writer = new IngestWriter({ db, store, memory });
    assert.ok(writer.staged, 'transcript rows commit with their history rows');
    await writer.write(message(0, 0), { guildId: 'g1' });

    // One group: 40 new messages over 4 channels, and one whose id channel 0 already holds.
    const fresh: HistoryEntry[] = [];
    for (let index = 1; index <= 10; index += 1) for (let channel = 0; channel < 4; channel += 1) fresh.push(message(channel, index));
    const writes = fresh.map((entry) => writer.write(entry, { guildId: 'g1' }));
    const duplicate = writer.write({ ...message(0, 0), seq: 99 }, { guildId: 'g1' });
    await Promise.all(writes);
    await assert.rejects(duplicate, (error: { code?: string }) => error.code === 'history_conflict');

    for (let channel = 0; channel < 4; channel += 1) {
      const held = (await store.archive(`gc-${channel}`)).map((entry) => entry.messageId);
      const expected = Array.from({ length: channel === 0 ? 11 : 10 }, (_, position) => `gc-${channel}-${channel === 0 ? position : position + 1}`);
      assert.deepEqual(held, expected, `channel ${channel} holds its messages in order, once`);
    }
    const transcripts = (await db.prepare(`SELECT COUNT(*) AS total FROM memory_items WHERE kind = 'transcript'`).get()) as { total: number };
    assert.equal(Number(transcripts.total), 41, 'every stored message has its transcript row');

    await memory.whenIndexed();
    const vectors = (await db.prepare('SELECT COUNT(*) AS total FROM memory_vectors').get()) as { total: number };
    const owed = (await db.prepare('SELECT COUNT(*) AS total FROM memory_vector_backlog').get()) as { total: number };
    assert.deepEqual([Number(vectors.total), Number(owed.total)], [41, 0], 'every transcript row got its vector');
  } finally {
    await memory.close();
    await db.close();
    dir.remove();
  }
});

test('a row staged in a transaction that commits late gets its vector, with nothing else waking the backlog', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const memory = await openMemoryStore({ db, dataDir: dir.path, settings: DEFAULTS.memory, embedder: new HashingEmbedder({ dimension: 64 }) });
  try {
    const writer = new IngestWriter({ db, store: new HistoryStore(db), memory });
    await db.transaction(async () => {
      await writer.insertNow(message(5, 0), {});
      // Held open past the backlog's short wait: a drain that read the backlog now would find
      // nothing (on PostgreSQL reads do not wait for the transaction) and stop for good.
      await new Promise((resolve) => setTimeout(resolve, 100));
    });
    const owed = async (): Promise<number> => Number(((await db.prepare('SELECT COUNT(*) AS total FROM memory_vector_backlog').get()) as { total: number }).total);
    // Polled, not `whenIndexed`, which would wake the backlog itself.
    const deadline = Date.now() + 10_000;
    while ((await owed()) > 0) {
      assert.ok(Date.now() < deadline, 'the backlog drained on its own once the transaction committed');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const vectors = (await db.prepare('SELECT COUNT(*) AS total FROM memory_vectors').get()) as { total: number };
    assert.equal(Number(vectors.total), 1);
  } finally {
    await memory.close();
    await db.close();
    dir.remove();
  }
});

test('a row edited while its vector was being made gets the vector of its new text', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const embedder = new GatedEmbedder();
  const memory = await openMemoryStore({ db, dataDir: dir.path, settings: DEFAULTS.memory, embedder });
  try {
    const writer = new IngestWriter({ db, store: new HistoryStore(db), memory });
    embedder.hold();
    await Promise.all([writer.write(message(0, 0), {}), writer.write(message(0, 1), {})]);
    // The backlog has read both rows and waits for their vectors: one is edited now.
    await embedder.waiting;
    await memory.updateTranscript('gc-0', [{ messageId: 'gc-0-1', content: 'the ferry now leaves at ten' }]);
    embedder.open();
    await memory.whenIndexed();

    const rows = (await db
      .prepare(
        `SELECT i.content, v.vector FROM memory_items i JOIN memory_vectors v ON v.item_rowid = i.rowid
          WHERE i.kind = 'transcript' ORDER BY i.rowid`,
      )
      .all()) as Array<{ content: string; vector: Uint8Array }>;
    assert.equal(rows.length, 2, 'both rows have one vector');
    const reference = new HashingEmbedder({ dimension: 64 });
    for (const row of rows) {
      const stored = new Float32Array(new Uint8Array(row.vector).buffer);
      assert.deepEqual([...stored], [...reference.embedOne(row.content)], `the vector is that of "${row.content}"`);
    }
  } finally {
    embedder.open();
    await memory.close();
    await db.close();
    dir.remove();
  }
});

test('large batches embedded on the embedding thread equal the inline vectors', async () => {
  const texts = Array.from({ length: 200 }, (_, index) => `message ${index}: Ünïcode, numbers ${index * 7} and the café rota`);
  const inline = new HashingEmbedder({ dimension: 256 });
  const threaded = new HashingEmbedder({ dimension: 256, offThread: true });
  const [expected, actual] = [await inline.embed(texts), await threaded.embed(texts)];
  assert.equal(actual.length, texts.length);
  actual.forEach((vector, index) => assert.deepEqual([...vector], [...expected[index]!], `vector ${index}`));
  // Another weighting in the same thread keeps its own vectors.
  const weighted = new HashingEmbedder({ dimension: 256, stopWordWeight: 0.5, offThread: true });
  const reweighted = await weighted.embed(texts);
  assert.deepEqual([...reweighted[3]!], [...new HashingEmbedder({ dimension: 256, stopWordWeight: 0.5 }).embedOne(texts[3]!)]);
});

test(
  'two groups in flight: the second commits while the first is held, and outcomes are told in the order the groups formed',
  { skip: TEST_STORAGE !== 'postgres' && 'one connection on SQLite: groups commit one after another' },
  async () => {
    const dir = tempDir();
    const db = await openTestDatabase(dir.path);
    try {
      await db.exec('CREATE TABLE gc_rows (id TEXT PRIMARY KEY)');
      await db.prepare('INSERT INTO gc_rows (id) VALUES (?)').run('taken');
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let entered!: () => void;
      const held = new Promise<void>((resolve) => (entered = resolve));
      const group = new GroupCommit<string>({
        db,
        concurrency: 2,
        write: async (ids) => {
          for (const id of ids) {
            // The first group stops halfway, inside its transaction, until the test lets it go on.
            if (id === 'taken' && ids.length > 1) {
              entered();
              await gate;
            }
            await db.prepare('INSERT INTO gc_rows (id) VALUES (?)').run(id);
          }
        },
      });
      const told: string[] = [];
      const track = (id: string) =>
        group.submit(id).then(
          () => void told.push(`${id} stored`),
          () => void told.push(`${id} refused`),
        );
      // First group: two new ids and one the table already holds (its write fails, after the gate).
      const first = ['a1', 'a2', 'taken'].map(track);
      await held;
      const second = track('b1');
      const stored = async (id: string) => ((await db.prepare('SELECT COUNT(*) AS n FROM gc_rows WHERE id = ?').get(id)) as { n: number }).n;
      await waitUntil(async () => Number(await stored('b1')) === 1, 'the second group committed while the first is held');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(told, [], 'nothing is told before the first group is decided');
      assert.equal(group.idle, false);

      release();
      await group.flush();
      await Promise.all([...first, second]);
      // The first group failed whole and was retried one write at a time: only its bad write is refused.
      assert.deepEqual(told, ['a1 stored', 'a2 stored', 'taken refused', 'b1 stored']);
      const rows = (await db.prepare('SELECT id FROM gc_rows ORDER BY id').all()) as Array<{ id: string }>;
      assert.deepEqual(
        rows.map((row) => row.id),
        ['a1', 'a2', 'b1', 'taken'],
      );
      assert.equal(group.idle, true);
    } finally {
      await db.close();
      dir.remove();
    }
  },
);

test('flush waits for every write queued before it, however many groups they take', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  try {
    await db.exec('CREATE TABLE gc_rows (id TEXT PRIMARY KEY)');
    const group = new GroupCommit<string>({
      db,
      maxBatch: 3,
      concurrency: TEST_STORAGE === 'postgres' ? 2 : 1,
      write: async (ids) => {
        for (const id of ids) await db.prepare('INSERT INTO gc_rows (id) VALUES (?)').run(id);
      },
    });
    const writes = Array.from({ length: 10 }, (_, index) => group.submit(`w${index}`));
    await group.flush();
    const count = (await db.prepare('SELECT COUNT(*) AS n FROM gc_rows').get()) as { n: number };
    assert.equal(Number(count.n), 10, 'all ten committed by the time flush resolves');
    await Promise.all(writes);
    assert.equal(group.stats.commits, 4, 'ten writes in groups of at most three');
    assert.equal(group.idle, true);
  } finally {
    await db.close();
    dir.remove();
  }
});

test('a group held back before it was sent fails whole at once, not once more per write', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  try {
    let calls = 0;
    const group = new GroupCommit<string>({
      db,
      write: async () => {
        calls += 1;
        throw new MagpieError(WRITES_HELD, 'writes wait until the writer lock is confirmed', { retryable: true });
      },
    });
    const outcomes = await Promise.allSettled(Array.from({ length: 5 }, (_, index) => group.submit(`w${index}`)));
    assert.deepEqual(
      outcomes.map((outcome) => (outcome.status === 'rejected' ? (outcome.reason as { code?: string }).code : 'stored')),
      Array.from({ length: 5 }, () => WRITES_HELD),
    );
    assert.equal(calls, 1, 'one attempt for the group: retrying each write alone would only wait again');
    assert.equal(group.idle, true);
  } finally {
    await db.close();
    dir.remove();
  }
});
