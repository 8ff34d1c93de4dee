/**
 * The store contract: cases every backend must pass, written once against `StorageTarget` and
 * run literally the same on SQLite and on PostgreSQL (test/postgres-store.test.ts).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CalibrationStore } from '../../src/channel/calibration-store.js';
import { channelIdsWithHistory, contextCensus } from '../../src/channel/census.js';
import { HistoryStore, type NewSummary } from '../../src/channel/history-store.js';
import type { HistoryEntry } from '../../src/context/types.js';
import { DailyTokenBudget } from '../../src/app/cost-guards.js';
import { AttachmentStore, type StoredAttachment } from '../../src/attachments/attachment-store.js';
import type { Clock } from '../../src/common/clock.js';
import { MagpieError } from '../../src/common/errors.js';
import { ChannelViews, privateThreadKey } from '../../src/privacy/channel-views.js';
import { storageError } from '../../src/storage/storage-error.js';
import { createChannelHistoryTool } from '../../src/worker/channel-history-tool.js';
import { listPersonas, PersonaStore } from '../../src/persona/persona-store.js';
import { ALL_MIGRATIONS } from '../../src/app/migrations.js';
import { openStorageForWriting, type OpenedStorage, type StorageTarget } from '../../src/storage/open-storage.js';
import { failInserts } from './storage.js';

/** A backend under contract: each call gives a fresh, empty store (a new data dir or schema). */
export interface ContractBackend {
  name: 'sqlite' | 'postgres';
  freshTarget(): StorageTarget;
}

export interface ContractCase {
  name: string;
  run(backend: ContractBackend): Promise<void> | void;
}

export const CHILD_CHANNEL = 'killed';

export function entry(channelId: string, seq: number, overrides: Partial<HistoryEntry> = {}): HistoryEntry {
  return {
    seq,
    channelId,
    messageId: `m${seq}`,
    kind: 'message',
    role: 'user',
    authorId: 'u1',
    authorName: 'alice',
    content: `message ${seq}`,
    createdAt: 1_700_000_000_000 + seq,
    tokens: 5,
    turnId: seq,
    ...overrides,
  };
}

export function childEntry(seq: number): HistoryEntry {
  return entry(CHILD_CHANNEL, seq);
}

function marker(channelId: string, fromSeq: number, toSeq: number): NewSummary {
  return { channelId, kind: 'marker', fromSeq, toSeq, content: `[${toSeq - fromSeq + 1} messages cut]`, tokens: 4, createdAt: 1 };
}

function summary(channelId: string, fromSeq: number, toSeq: number, content = `summary ${fromSeq}-${toSeq}`): NewSummary {
  return { channelId, kind: 'summary', fromSeq, toSeq, content, tokens: 7, createdAt: 2, summarizer: 'test' };
}

let opened = 0;
function open(target: StorageTarget, writerKey = `contract-${process.pid}-${(opened += 1)}`): Promise<OpenedStorage> {
  return openStorageForWriting(target, ALL_MIGRATIONS, { command: 'magpie contract', writerKey });
}

/** Runs `work` on a fresh store, closed afterwards whatever happens. */
async function withStore(backend: ContractBackend, work: (store: OpenedStorage, target: StorageTarget) => Promise<void> | void): Promise<void> {
  const target = backend.freshTarget();
  const store = await open(target);
  try {
    await work(store, target);
  } finally {
    await store.close();
  }
}

const CHILD = fileURLToPath(new URL('./store-child.js', import.meta.url));

/** Starts the writer child and resolves once it printed `ready` (a prefix), with that line. */
async function startChild(target: StorageTarget, args: string[], ready: string) {
  const child = spawn(process.execPath, [CHILD, JSON.stringify(target), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const found = stdout.split('\n').find((candidate) => candidate.startsWith(ready));
      if (found) resolve(found);
    });
    child.on('close', (code) => reject(new Error(`the writer child ended (${code}) before "${ready}": ${stderr}`)));
  });
  return {
    line,
    pid: child.pid!,
    async kill(): Promise<void> {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Retries `attempt` until it stops throwing: the server notices a killed client's socket on its own time. */
async function eventually<T>(attempt: () => Promise<T>, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`${what}: still failing after 60 s`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

export const STORE_CONTRACT: readonly ContractCase[] = [
  {
    name: 'history: insert, reload in order, a known message id is skipped, a taken seq is refused',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        for (let seq = 1; seq <= 3; seq += 1) assert.equal(await history.insert(entry('c1', seq), { guildId: 'g1' }), true);
        assert.equal(await history.insert(entry('c1', 4, { messageId: 'm2', content: 'again' }), { guildId: 'g1' }), false, 'same message id: skipped');
        await assert.rejects(
          () => history.insert(entry('c1', 3, { messageId: 'other' }), { guildId: 'g1' }),
          (error: unknown) => error instanceof MagpieError && error.code === 'history_seq_taken',
        );
        const loaded = await history.load('c1');
        assert.deepEqual(loaded.entries, [entry('c1', 1), entry('c1', 2), entry('c1', 3)]);
        assert.equal(loaded.nextSeq, 4);
        assert.equal(loaded.nextTurnId, 4);
        assert.deepEqual(loaded.location, { guildId: 'g1' });
        assert.deepEqual(await history.findByMessageId('c1', 'm2'), entry('c1', 2));
        assert.equal(await history.findBySeq('c1', 9), undefined);
        assert.equal(await history.lastMessageTime('c1'), entry('c1', 3).createdAt);
        assert.equal(await history.lastMessageTime('empty'), undefined);
        // Tool traffic is born archived; messages wait for the transcript index.
        await history.insert(entry('c1', 4, { messageId: 'tool-1', kind: 'tool_call', role: 'assistant' }), {});
        assert.deepEqual((await history.unarchived('c1')).map((row) => row.seq), [1, 2, 3]);
        await history.markArchived([{ channelId: 'c1', seq: 1 }, { channelId: 'c1', seq: 3 }]);
        assert.deepEqual((await history.unarchived('c1')).map((row) => row.seq), [2]);
        await history.updateContent('c1', 2, 'edited', 9);
        assert.equal((await history.findBySeq('c1', 2))?.content, 'edited');
        await history.deleteEntries('c1', [2]);
        assert.deepEqual((await history.archive('c1')).map((row) => row.seq), [1, 3, 4]);
      }),
  },
  {
    name: 'history: a splice is all or nothing, and the archive keeps every entry',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        for (let seq = 1; seq <= 6; seq += 1) await history.insert(entry('c1', seq), { guildId: 'g1' });
        const first = await history.splice({ channelId: 'c1', entryRange: { toSeq: 2 }, retiredSummaryIds: [], summary: summary('c1', 1, 2) });
        const before = await history.load('c1');
        assert.deepEqual(before.entries.map((row) => row.seq), [3, 4, 5, 6]);
        assert.deepEqual(before.summaries.map((row) => row.id), [first]);
        // The new summary's insert fails after the live start moved and the old summary was retired.
        const restore = await failInserts(db, 'history_summaries', `NEW.content = 'doomed'`);
        await assert.rejects(() => history.splice({ channelId: 'c1', entryRange: { toSeq: 4 }, retiredSummaryIds: [first], summary: summary('c1', 1, 4, 'doomed') }));
        await restore();
        assert.deepEqual(await history.load('c1'), before, 'nothing of the failed splice is kept');
        const second = await history.splice({ channelId: 'c1', entryRange: { toSeq: 4 }, retiredSummaryIds: [first], summary: summary('c1', 1, 4) });
        assert.ok(second > first, 'ids grow');
        const after = await history.load('c1');
        assert.deepEqual(after.entries.map((row) => row.seq), [5, 6]);
        assert.deepEqual(after.summaries.map((row) => [row.id, row.kind, row.fromSeq, row.toSeq]), [[second, 'summary', 1, 4]]);
        assert.equal(after.archivedCount, 6);
        assert.deepEqual((await history.archive('c1')).map((row) => row.seq), [1, 2, 3, 4, 5, 6], 'the archive keeps what left the context');
        assert.deepEqual(
          (await history.allSummaries('c1')).map((row) => [row.id, row.live]),
          [[first, false], [second, true]],
        );
        await history.insert(entry('c1', 7, { messageId: 'tool-7', kind: 'tool_call', role: 'assistant', tokens: 3 }), {});
        assert.deepEqual(await channelIdsWithHistory(db), ['c1']);
        assert.deepEqual(await contextCensus(db, 'c1'), {
          channelId: 'c1',
          messages: 6,
          liveMessages: 2,
          underSummaries: 4,
          underMarkers: 0,
          liveEntries: 3,
          liveEntryTokens: 13,
          summaries: 1,
          markers: 0,
          summaryTokens: 7,
          lastMessageAt: entry('c1', 7).createdAt,
        });
      }),
  },
  {
    name: 'census: a message held back by a cut through overlapping turns counts as live, not as summarized',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        // Turn 2's reply (seq 5) lands after turn 3's question: a cut after seq 3 holds seq 2.
        const turns = [1, 2, 1, 3, 2, 3];
        for (const [index, turnId] of turns.entries()) {
          const seq = index + 1;
          const reply = turns.indexOf(turnId) < index;
          await history.insert(entry('c1', seq, { turnId, ...(reply ? { role: 'assistant' as const, authorId: 'bot' } : {}) }), {});
        }
        await history.splice({ channelId: 'c1', entryRange: { toSeq: 3 }, retiredSummaryIds: [], summary: summary('c1', 1, 3) });
        assert.deepEqual((await history.load('c1')).entries.map((row) => row.seq), [2, 4, 5, 6], 'the held message is live');
        const census = await contextCensus(db, 'c1');
        assert.deepEqual(
          [census.messages, census.liveMessages, census.underSummaries, census.underMarkers, census.liveEntries, census.liveEntryTokens],
          [6, 4, 2, 0, 4, 20],
        );
        // The next summary takes the held message: it starts at seq 2, inside the first one's range.
        await history.insert(entry('c1', 7, { turnId: 4 }), {});
        await history.insert(entry('c1', 8, { turnId: 4, role: 'assistant', authorId: 'bot' }), {});
        await history.splice({ channelId: 'c1', entryRange: { toSeq: 6 }, retiredSummaryIds: [], summary: summary('c1', 2, 6) });
        const later = await contextCensus(db, 'c1');
        assert.deepEqual([later.messages, later.liveMessages, later.underSummaries, later.underMarkers], [8, 2, 6, 0], 'each message counted once');
      }),
  },
  {
    name: 'history: truncation markers, extended and shrunk, and a seq counter that survives them',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        for (let seq = 1; seq <= 8; seq += 1) await history.insert(entry('c1', seq), {});
        const markerId = await history.truncate('c1', { toSeq: 2 }, marker('c1', 1, 2));
        assert.deepEqual((await history.load('c1')).summaries.map((row) => [row.id, row.kind, row.fromSeq, row.toSeq]), [[markerId, 'marker', 1, 2]]);
        await history.extendMarker('c1', { id: markerId, toSeq: 4, content: '[4 messages cut]', tokens: 4 });
        let loaded = await history.load('c1');
        assert.deepEqual(loaded.entries.map((row) => row.seq), [5, 6, 7, 8]);
        assert.deepEqual(loaded.summaries.map((row) => [row.fromSeq, row.toSeq, row.content]), [[1, 4, '[4 messages cut]']]);
        // A summary of the first two leaves the rest of the marker in place.
        const summaryId = await history.splice({
          channelId: 'c1',
          retiredSummaryIds: [],
          shrunkMarker: { id: markerId, fromSeq: 3, content: '[2 messages cut]', tokens: 4 },
          summary: summary('c1', 1, 2),
        });
        loaded = await history.load('c1');
        assert.deepEqual(loaded.summaries.map((row) => [row.id, row.fromSeq, row.toSeq]), [[summaryId, 1, 2], [markerId, 3, 4]]);
        assert.equal(loaded.nextSeq, 9);
        // Every live entry compacted away: the next seq still follows the summaries.
        await history.deleteEntries('c1', [5, 6, 7, 8]);
        await history.truncate('c1', { toSeq: 8 }, marker('c1', 5, 8));
        assert.equal((await history.load('c1')).nextSeq, 9);
      }),
  },
  {
    name: 'a rolled-back transaction leaves nothing; a rolled-back savepoint keeps the rest of its transaction',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        await assert.rejects(() =>
          db.transaction(async () => {
            await history.insert(entry('c1', 1), {});
            await history.truncate('c1', { toSeq: 1 }, marker('c1', 1, 1));
            throw new Error('changed my mind');
          }),
        );
        assert.equal(db.inTransaction, false);
        assert.deepEqual(await history.archive('c1'), []);
        assert.deepEqual(await history.allSummaries('c1'), []);
        await db.transaction(async () => {
          await history.insert(entry('c1', 1), {});
          await assert.rejects(() =>
            db.transaction(async () => {
              await history.insert(entry('c1', 2), {});
              throw new Error('inner only');
            }),
          );
          await history.insert(entry('c1', 3), {});
        });
        assert.deepEqual((await history.archive('c1')).map((row) => row.seq), [1, 3]);
      }),
  },
  {
    name: 'afterCommit: once the outermost transaction committed, what it wrote visible from outside; never after a rollback; at once outside',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        const seen: Array<{ at: string; rows: Promise<number> | number }> = [];
        // Read from outside the transaction's async context, as a woken background task does.
        const rowsNow = (): Promise<number> => new Promise((resolve, reject) => setImmediate(() => history.archive('c1').then((rows) => resolve(rows.length), reject)));
        await db.transaction(async () => {
          await history.insert(entry('c1', 1), {});
          db.afterCommit(() => seen.push({ at: 'outer', rows: rowsNow() }));
          await db.transaction(async () => {
            await history.insert(entry('c1', 2), {});
            db.afterCommit(() => seen.push({ at: 'savepoint', rows: rowsNow() }));
          });
          assert.deepEqual(seen, [], 'nothing runs before the commit');
        });
        assert.deepEqual(seen.map((item) => item.at), ['outer', 'savepoint'], 'in the order added, once committed');
        assert.deepEqual(await Promise.all(seen.map((item) => item.rows)), [2, 2], 'what the transaction wrote is visible to them');

        let afterRollback = 0;
        await assert.rejects(() =>
          db.transaction(async () => {
            await history.insert(entry('c1', 3), {});
            db.afterCommit(() => (afterRollback += 1));
            throw new Error('changed my mind');
          }),
        );
        assert.equal(afterRollback, 0, 'a rolled-back transaction wakes nothing');

        let outside = 0;
        db.afterCommit(() => (outside += 1));
        assert.equal(outside, 1, 'outside a transaction it runs at once');
        // One that throws stops neither the commit nor the others.
        let second = false;
        await db.transaction(async () => {
          await history.insert(entry('c1', 4), {});
          db.afterCommit(() => {
            throw new Error('broken listener');
          });
          db.afterCommit(() => (second = true));
        });
        assert.equal(second, true);
        assert.deepEqual((await history.archive('c1')).map((row) => row.seq), [1, 2, 4]);
      }),
  },
  {
    name: 'calibration: saved per channel with its parts, overwritten, unknown channels uncalibrated',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const calibration = new CalibrationStore(db);
        assert.deepEqual(await calibration.load('c1'), { factor: 1, observations: 0 });
        await calibration.save('c1', { factor: 1.2345, observations: 3 }, 10);
        await calibration.save('c2', { factor: 3.5, observations: 1 }, 10);
        await calibration.save('c1', { factor: 1.1, observations: 4 }, 20);
        assert.deepEqual(await new CalibrationStore(db).load('c1'), { factor: 1.1, observations: 4 });
        assert.deepEqual(await calibration.load('c2'), { factor: 3.5, observations: 1 });
        // Out of range (an older build's value) is clamped on load.
        await calibration.save('c3', { factor: 40, observations: 2 }, 30);
        assert.deepEqual(await calibration.load('c3'), { factor: 8, observations: 2 });
        // The messages' factor and the tools' correction come back with it, and go when unset.
        await calibration.save('c4', { factor: 1.05, observations: 7, messageFactor: 0.9123, toolFactor: 1.3456 }, 40);
        assert.deepEqual(await new CalibrationStore(db).load('c4'), { factor: 1.05, observations: 7, messageFactor: 0.9123, toolFactor: 1.3456 });
        await calibration.save('c4', { factor: 1.1, observations: 8, messageFactor: 0.95 }, 50);
        assert.deepEqual(await calibration.load('c4'), { factor: 1.1, observations: 8, messageFactor: 0.95 });
      }),
  },
  {
    name: 'personas: set, replaced, cleared, and seen by a new store on the same data',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const personas = await PersonaStore.open(db);
        await personas.set('c1', '  A pirate.  ', 'u1', 100);
        await personas.set('c2', 'A poet.', 'u2', 200);
        await personas.set('c1', 'A captain.', 'u3', 300);
        assert.equal(await personas.clear('c2'), true);
        assert.equal(await personas.clear('c2'), false);
        const fresh = await PersonaStore.open(db);
        assert.deepEqual(fresh.get('c1'), { channelId: 'c1', prompt: 'A captain.', setBy: 'u3', setAt: 300 });
        assert.equal(fresh.get('c2'), undefined);
        assert.deepEqual((await listPersonas(db)).map((persona) => persona.channelId), ['c1']);
      }),
  },
  {
    name: 'token budget: spending adds up per channel and day, survives a new store, old days are pruned',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const DAY = 86_400_000;
        const clock: Clock & { at: number } = { at: 100 * DAY, now: () => clock.at };
        const budget = await DailyTokenBudget.open(clock, db);
        budget.record('c1', 400.4);
        budget.record('c1', 600);
        budget.record('c2', 5);
        await budget.settled();
        assert.equal((await DailyTokenBudget.open(clock, db)).spentToday('c1'), 1_000);
        assert.equal(budget.spentToday('c2'), 5);
        clock.at += 8 * DAY;
        budget.record('c1', 1);
        assert.equal(budget.spentToday('c1'), 1, 'a new day starts from nothing');
        await budget.settled();
        assert.equal(((await db.prepare('SELECT COUNT(*) AS total FROM token_budget').get()) as { total: number }).total, 1, 'days past a week are pruned');
      }),
  },
  {
    name: 'channel views: keys per channel, public threads follow their parent, private ones keep theirs',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const views = new ChannelViews(db);
        assert.equal(await views.record({ channelId: 'parent', guildId: 'g1', viewKey: 'everyone' }), true);
        await views.record({ channelId: 'public-thread', guildId: 'g1', parentId: 'parent', viewKey: 'everyone' });
        await views.record({ channelId: 'private-thread', guildId: 'g1', parentId: 'parent', viewKey: privateThreadKey('private-thread') });
        assert.equal(await views.record({ channelId: 'parent', guildId: 'g1', viewKey: 'everyone' }), false, 'unchanged');
        assert.equal(await views.record({ channelId: 'parent', guildId: 'g1', viewKey: 'mods' }), true);
        const fresh = new ChannelViews(db);
        assert.equal(await fresh.keyOf('public-thread'), 'mods');
        assert.equal(await fresh.keyOf('private-thread'), privateThreadKey('private-thread'));
        assert.equal(await fresh.keyOf('never-seen'), '');
      }),
  },
  {
    name: 'attachments: image bytes and text files come back exactly, replaced per message, gone with it',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const attachments = new AttachmentStore(db);
        // Every byte value, so that no encoding can pass by luck.
        const bytes = Buffer.from(Array.from({ length: 512 }, (_, index) => index % 256));
        const image: StoredAttachment = { kind: 'image', name: 'plan.png', size: 512, mediaType: 'image/png', width: 30, height: 20, tokens: 1, data: bytes.toString('base64') };
        const text: StoredAttachment = { kind: 'text', name: 'notes.txt', size: 9, text: 'some text', truncated: true, maxChars: 4000, tokens: 12 };
        await attachments.replace('c1', 1, 'm1', [image, text]);
        await attachments.replace('c1', 2, 'm2', [text]);
        await attachments.replace('c1', 2, 'm2', [{ ...text, name: 'other.txt', truncated: false }]);
        assert.deepEqual(await attachments.liveFrom('c1', 1), new Map([[1, [image, text]], [2, [{ ...text, name: 'other.txt', truncated: false }]]]));
        assert.equal(await attachments.tokensOf('c1', 1), 13);
        assert.equal(await attachments.tokensOf('c1', 3), 0);
        await attachments.delete('c1', [1]);
        assert.deepEqual([...(await attachments.liveFrom('c1', 0)).keys()], [2]);
      }),
  },
  {
    name: 'channel history tool: newest first, case-insensitive words, wildcards taken literally, one channel only',
    run: (backend) =>
      withStore(backend, async ({ db }) => {
        const history = new HistoryStore(db);
        const texts = ['plain one', 'the Blue door is 50% open_now', 'plain three', 'blue doors 500 open'];
        for (const [index, content] of texts.entries()) await history.insert(entry('here', index + 1, { content }), {});
        await history.insert(entry('there', 1, { content: 'the blue door elsewhere' }), {});
        const tool = createChannelHistoryTool(db);
        const read = async (input: unknown) => {
          const outcome = await tool.run(input, { channelId: 'here' });
          assert.equal(outcome.isError, false, outcome.content);
          return (JSON.parse(outcome.content) as Array<{ message_id: string }>).map((message) => message.message_id);
        };
        assert.deepEqual(await read({}), ['m4', 'm3', 'm2', 'm1']);
        assert.deepEqual(await read({ query: 'BLUE door' }), ['m4', 'm2']);
        assert.deepEqual(await read({ query: '50%' }), ['m2']);
        assert.deepEqual(await read({ query: 'open_now' }), ['m2']);
      }),
  },
  {
    name: 'a writer killed (SIGKILL) in the middle of a transaction leaves nothing of it',
    async run(backend) {
      const target = backend.freshTarget();
      // Migrated once before, so that the child's transaction is its only write.
      await (await open(target)).close();
      const child = await startChild(target, ['transaction'], 'inside');
      assert.equal(child.line, 'inside 3', 'the child saw its own three entries inside the transaction');
      await child.kill();
      const store = await eventually(() => open(target), 'reopening after the kill');
      try {
        const history = new HistoryStore(store.db);
        assert.deepEqual(await history.archive(CHILD_CHANNEL), [], 'no entry of the killed transaction');
        assert.deepEqual(await history.allSummaries(CHILD_CHANNEL), [], 'no marker of the killed transaction');
        assert.equal((await history.load(CHILD_CHANNEL)).nextSeq, 1);
        // Its rows hold no lock either: the same seqs are written now.
        for (let seq = 1; seq <= 3; seq += 1) assert.equal(await history.insert(childEntry(seq), {}), true);
        assert.equal((await history.archive(CHILD_CHANNEL)).length, 3);
      } finally {
        await store.close();
      }
    },
  },
  {
    name: 'a second writer with the same writer key is refused, naming the holder, until the holder dies',
    async run(backend) {
      const target = backend.freshTarget();
      await (await open(target)).close();
      const holder = await startChild(target, ['hold', 'shard-0'], 'holding');
      try {
        await assert.rejects(
          () => open(target, 'shard-0'),
          (error: unknown) =>
            error instanceof MagpieError && error.code === 'data_dir_locked' && error.message.includes('magpie lock-holder') && error.message.includes(String(holder.pid)),
        );
      } finally {
        await holder.kill();
      }
      const store = await eventually(() => open(target, 'shard-0'), 'taking the lock of a killed holder');
      await store.close();
    },
  },
];

/** PostgreSQL alone: writers of different keys (shards) share one schema; the server can go away. */
export const POSTGRES_ONLY_CONTRACT: readonly ContractCase[] = [
  {
    name: 'a connection the server drops mid-transaction is a retryable storage error, nothing half-written is kept, and the next write works',
    run: (backend) =>
      withStore(backend, async ({ db }, target) => {
        assert.equal(target.backend, 'postgres');
        const history = new HistoryStore(db);
        await history.insert(entry('c1', 1), {});
        // The server ends the transaction's session midway (another process asks it to).
        const terminate = `const pg = require('pg'); const client = new pg.Client(process.argv[1]);
          client.connect().then(() => client.query('SELECT pg_terminate_backend($1)', [Number(process.argv[2])])).then(() => client.end());`;
        let failure: unknown;
        await assert.rejects(() =>
          db.transaction(async () => {
            await history.insert(entry('c1', 2), {});
            const { pid } = (await db.prepare('SELECT pg_backend_pid() AS pid').get()) as { pid: number };
            const ended = spawnSync(process.execPath, ['-e', terminate, target.backend === 'postgres' ? target.url : '', String(pid)], { encoding: 'utf8' });
            assert.equal(ended.status, 0, ended.stderr);
            try {
              await history.insert(entry('c1', 3), {});
            } catch (error) {
              failure = error;
              throw error;
            }
          }),
        );
        const problem = storageError(target.dataDir, failure);
        assert.ok(problem, `a storage error: ${String(failure)}`);
        assert.equal(problem.code, 'storage_connection');
        assert.equal(problem.retryable, true, 'the write is retried on a new connection');
        assert.match(problem.message, /PostgreSQL connection was lost/);
        assert.match(problem.hint ?? '', /opens a new connection/);
        assert.deepEqual((await history.archive('c1')).map((row) => row.seq), [1], 'nothing of the interrupted transaction');
        // The pool replaced the ended connection.
        assert.equal(await history.insert(entry('c1', 2), {}), true);
        assert.deepEqual((await history.archive('c1')).map((row) => row.seq), [1, 2]);
      }),
  },
  {
    name: 'writers with different writer keys work side by side on one schema',
    async run(backend) {
      const target = backend.freshTarget();
      const zero = await open(target, 'shard-0');
      try {
        const one = await open(target, 'shard-1');
        try {
          await new HistoryStore(zero.db).insert(entry('zero', 1), {});
          await new HistoryStore(one.db).insert(entry('one', 1), {});
          assert.equal((await new HistoryStore(one.db).archive('zero')).length, 1, 'each sees what the other committed');
          await assert.rejects(() => open(target, 'shard-1'), (error: unknown) => error instanceof MagpieError && error.code === 'data_dir_locked');
        } finally {
          await one.close();
        }
        await (await open(target, 'shard-1')).close();
      } finally {
        await zero.close();
      }
    },
  },
];
