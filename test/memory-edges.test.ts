/**
 * Memory at its edges: what a model may put in a tool call, scoping of forget and of
 * near-duplicates, many channels with few loaded indexes, and calls that arrive after close.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { createMemoryTools, openMemoryStore } from '../src/memory/index.js';
import { openTestStore, type OpenedStore } from './support/memory-store.js';
import { openTestDatabase } from './support/storage.js';


describe('memory tools with garbage input', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore();
    await opened.store.archiveTranscript([
      { channelId: 'c1', messageId: 'm1', authorId: 'a', authorName: 'Ann', content: 'the deploy key rotates on fridays', createdAt: 1 },
    ]);
  });
  after(async () => opened.close());

  const context = { channelId: 'c1', guildId: 'g1' };

  test('every odd input to memory_search is a readable tool error or results, never a throw', async () => {
    const { memorySearch } = createMemoryTools(opened.store);
    const inputs: unknown[] = [
      null,
      [],
      ['query'],
      'deploy',
      42,
      { query: null },
      { query: ['deploy'] },
      { query: 'x'.repeat(50_000) },
      { query: '"' },
      { query: '*' },
      { query: 'NEAR(deploy key)' },
      { query: '-deploy' },
      { query: 'key:deploy' },
      { query: 'deploy AND OR NOT' },
      { query: '^deploy' },
      { query: '\u0000\ud800 deploy 😀 ключ 鍵' },
      { query: '😀😀😀' },
      { query: 'deploy', limit: 0 },
      { query: 'deploy', limit: 21 },
      { query: 'deploy', limit: 2.5 },
      { query: 'deploy', limit: '5' },
      { query: 'deploy', memory_type: 'secret' },
      { query: 'deploy', extra: true },
    ];
    for (const input of inputs) {
      const outcome = await memorySearch.run(input, context);
      assert.equal(typeof outcome.content, 'string', `content for ${JSON.stringify(input)?.slice(0, 60)}`);
      if (!outcome.isError) assert.ok(Array.isArray(JSON.parse(outcome.content)), `results for ${JSON.stringify(input)?.slice(0, 60)}`);
    }
    const fts = await memorySearch.run({ query: 'NEAR("deploy" key)*' }, context);
    assert.equal(fts.isError, false);
    assert.match(fts.content, /deploy key rotates/);
  });

  test('every odd input to memory_save is a readable tool error or a save, never a throw', async () => {
    const { memorySave } = createMemoryTools(opened.store);
    const inputs: unknown[] = [
      null,
      [],
      { content: null, memory_type: 'fact' },
      { content: ['a'], memory_type: 'fact' },
      { content: 'x'.repeat(10_000), memory_type: 'fact' },
      { content: '   ', memory_type: 'fact' },
      { content: 'ok', memory_type: null },
      { content: 'ok', memory_type: 'FACT' },
      { content: 'ok', memory_type: 'fact', importance: 2 },
      { content: 'ok', memory_type: 'fact', importance: Number.NaN },
      { content: 'ok', memory_type: 'fact', importance: '0.5' },
    ];
    for (const input of inputs) {
      const outcome = await memorySave.run(input, context);
      assert.equal(outcome.isError, true, `refused: ${JSON.stringify(input)?.slice(0, 60)}`);
      assert.match(outcome.content, /^invalid input: /);
    }
    const odd = await memorySave.run({ content: 'Ann’s key: "NEAR(x)*" -- 😀 \ud800', memory_type: 'fact' }, context);
    assert.equal(odd.isError, false, odd.content);
  });
});

describe('forget within a location', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore({ scope: 'guild' });
  });
  after(async () => opened.close());

  test('under guild scope a channel whose view is not on record sees no guild memory until it is', async () => {
    await opened.store.recordChannelView?.({ channelId: 'c3', guildId: 'g1', viewKey: 'staff-only' });
    await opened.store.save({ location: { channelId: 'c3', guildId: 'g1' }, content: 'The staff door code is 4418', memoryType: 'fact' });
    const fromUnknown = await opened.store.search({ location: { channelId: 'c4', guildId: 'g1' }, query: 'staff door code' });
    assert.ok(!fromUnknown.some((result) => result.content.includes('4418')), 'unknown view: nothing shared');
    // Another never-seen channel does not share the unknown key with c4 either.
    await opened.store.save({ location: { channelId: 'c5', guildId: 'g1' }, content: 'The loading bay opens at six', memoryType: 'fact' });
    const fromOtherUnknown = await opened.store.search({ location: { channelId: 'c4', guildId: 'g1' }, query: 'loading bay' });
    assert.ok(!fromOtherUnknown.some((result) => result.content.includes('loading bay')));
    await opened.store.recordChannelView?.({ channelId: 'c4', guildId: 'g1', viewKey: 'staff-only' });
    const known = await opened.store.search({ location: { channelId: 'c4', guildId: 'g1' }, query: 'staff door code' });
    assert.ok(known.some((result) => result.content.includes('4418')), 'same view on record: shared');
  });

  test('only what belongs to the channel (or the DM user) can be forgotten there', async () => {
    // Guild scope shares only between channels whose (equal) view permissions are on record.
    for (const channelId of ['c1', 'c2']) await opened.store.recordChannelView?.({ channelId, guildId: 'g1', viewKey: 'everyone' });
    const other = await opened.store.save({ location: { channelId: 'c2', guildId: 'g1' }, content: 'Bea runs the book club', memoryType: 'fact' });
    const dm = await opened.store.save({ location: { channelId: 'dm1', dmUserId: 'u1' }, content: 'U1 likes tea', memoryType: 'preference' });
    const mine = await opened.store.save({ location: { channelId: 'c1', guildId: 'g1' }, content: 'Cal owns the wiki', memoryType: 'fact' });
    // The guild scope lets c1 see c2's memory, but not delete it.
    const seen = await opened.store.search({ location: { channelId: 'c1', guildId: 'g1' }, query: 'book club' });
    assert.ok(seen.some((result) => result.id === other.id));
    assert.equal(await opened.store.forget(other.id, { channelId: 'c1', guildId: 'g1' }), false);
    assert.equal(await opened.store.forget(dm.id, { channelId: 'c1', guildId: 'g1' }), false);
    assert.equal(await opened.store.forget(mine.id, { channelId: 'dm1', dmUserId: 'u1' }), false);
    // A DM memory follows its user into another DM channel with them.
    assert.equal(await opened.store.forget(dm.id, { channelId: 'dm-other', dmUserId: 'u1' }), true);
    assert.equal(await opened.store.forget(mine.id, { channelId: 'c1', guildId: 'g1' }), true);
    assert.equal(await opened.store.forget(other.id), true, 'the operator (no location) can forget anything');
  });
});

describe('near-duplicates stay within their scope', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore({ scope: 'guild' });
  });
  after(async () => opened.close());

  test('the same fact saved in two channels and a DM is three memories', async () => {
    const content = 'The team standup is at nine every weekday';
    const first = await opened.store.save({ location: { channelId: 'c1', guildId: 'g1' }, content, memoryType: 'fact' });
    const second = await opened.store.save({ location: { channelId: 'c2', guildId: 'g1' }, content, memoryType: 'fact' });
    const third = await opened.store.save({ location: { channelId: 'dm', dmUserId: 'u1' }, content: `${content}.`, memoryType: 'fact' });
    assert.deepEqual([first.status, second.status, third.status], ['saved', 'saved', 'saved']);
    assert.equal(new Set([first.id, second.id, third.id]).size, 3);
    const again = await opened.store.save({ location: { channelId: 'c2', guildId: 'g1' }, content: `${content}!`, memoryType: 'fact' });
    assert.deepEqual(again, { id: second.id, status: 'updated' });
    const c1 = await opened.store.list({ location: { channelId: 'c1' }, kind: 'memory' });
    assert.equal(c1.find((record) => record.id === first.id)?.content, content, 'c1 untouched by c2');
  });
});

describe('many channels, few loaded indexes', () => {
  test('searches stay scoped and complete while indexes are evicted and reloaded', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
    const db = await openTestDatabase(dir);
    const store = await openMemoryStore({
      db,
      dataDir: dir,
      settings: { ...DEFAULTS.memory, scope: 'channel' },
      maxLoadedIndexes: 3,
    });
    try {
      const channels = Array.from({ length: 12 }, (_, index) => `ch${index}`);
      for (const [index, channelId] of channels.entries()) {
        await store.archiveTranscript(
          Array.from({ length: 5 }, (_, message) => ({
            channelId,
            messageId: `${channelId}-m${message}`,
            authorId: 'a',
            authorName: 'Ann',
            content: `channel ${index} codeword zebra${index} note ${message}`,
            createdAt: message,
          })),
        );
      }
      for (let round = 0; round < 3; round += 1) {
        for (const [index, channelId] of channels.entries()) {
          const results = await store.search({ location: { channelId }, query: `codeword zebra${index}`, limit: 20 });
          assert.ok(results.length > 0, `${channelId} finds its own`);
          assert.ok(results.every((result) => result.source_ids.every((id) => id.startsWith(`${channelId}-`))), `${channelId} sees only its own`);
        }
        await store.whenIndexed();
      }
    } finally {
      await store.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('calls after close', () => {
  test('a late archive, update, delete, save or search is refused cleanly, never half-written', async () => {
    const opened = await openTestStore();
    const { store, db } = opened;
    await store.archiveTranscript([{ channelId: 'c1', messageId: 'm1', authorId: 'a', authorName: 'Ann', content: 'before close', createdAt: 1 }]);
    await store.close();
    const rows = async () => ((await db.prepare('SELECT COUNT(*) AS total FROM memory_items').get()) as { total: number }).total;
    const before = await rows();
    const late = [
      store.archiveTranscript([{ channelId: 'c1', messageId: 'm2', authorId: 'a', authorName: 'Ann', content: 'after close', createdAt: 2 }]),
      store.updateTranscript('c1', [{ messageId: 'm1', content: 'edited after close' }]),
      store.save({ location: { channelId: 'c1' }, content: 'saved after close', memoryType: 'fact' }),
      store.search({ location: { channelId: 'c1' }, query: 'close' }),
    ];
    for (const outcome of await Promise.allSettled(late)) {
      if (outcome.status === 'rejected') assert.match(String(outcome.reason), /closed/);
    }
    assert.equal(await rows(), before);
    await opened.close();
  });
});
