import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { blobToVector, dot } from '../src/memory/embedder.js';
import { HashingEmbedder, type TranscriptEntryInput } from '../src/memory/index.js';
import type { SearchResult } from '../src/memory/types.js';
import { openTestStore, type OpenedStore } from './support/memory-store.js';
import { withOfflineApp } from './support/offline-app.js';

function message(channelId: string, messageId: string, authorName: string, content: string, at = 1_700_000_000_000): TranscriptEntryInput {
  return { channelId, messageId, authorId: `id-${authorName}`, authorName, content, createdAt: at };
}

describe('memory_save semantics', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore();
  });
  after(async () => opened.close());

  test('a new memory is saved with the default importance of its type', async () => {
    const result = await opened.store.save({
      location: { channelId: 'c1' },
      content: 'Dana is allergic to peanuts',
      memoryType: 'fact',
      sourceIds: ['m1'],
    });
    assert.equal(result.status, 'saved');
    const record = (await opened.store.list({ location: { channelId: 'c1' }, kind: 'memory' })).find((item) => item.id === result.id);
    assert.ok(record);
    assert.equal(record.importance, 0.6);
    assert.equal(record.memoryType, 'fact');
    assert.deepEqual(record.sourceIds, ['m1']);
    assert.equal(record.scope, 'channel');
  });

  test('an exact duplicate in the same scope is idempotent: same id, nothing added', async () => {
    const location = { channelId: 'c1' };
    const first = await opened.store.save({ location, content: 'The team meets on Tuesdays at 10', memoryType: 'decision' });
    const before = (await opened.store.stats(location)).memories;
    const again = await opened.store.save({ location, content: '  the team meets on Tuesdays at 10 ', memoryType: 'decision' });
    assert.equal(again.id, first.id);
    assert.equal(again.status, 'updated');
    assert.equal((await opened.store.stats(location)).memories, before);
  });

  test('a near-duplicate of the same type updates the existing memory', async () => {
    const location = { channelId: 'c1' };
    const first = await opened.store.save({ location, content: 'Erin prefers dark mode in every editor she uses', memoryType: 'preference' });
    const before = (await opened.store.stats(location)).memories;
    const near = await opened.store.save({
      location,
      content: 'Erin prefers dark mode in every editor she uses.',
      memoryType: 'preference',
      importance: 0.9,
    });
    assert.equal(near.id, first.id);
    assert.equal(near.status, 'updated');
    assert.equal((await opened.store.stats(location)).memories, before);
    const record = (await opened.store.list({ location, kind: 'memory' })).find((item) => item.id === first.id)!;
    assert.equal(record.content, 'Erin prefers dark mode in every editor she uses.');
    assert.equal(record.importance, 0.9);
  });

  test('similar memories with different numbers stay apart', async () => {
    const location = { channelId: 'c1' };
    const first = await opened.store.save({ location, content: 'Deploy freeze starts on December 15', memoryType: 'decision' });
    const second = await opened.store.save({ location, content: 'Deploy freeze starts on December 20', memoryType: 'decision' });
    assert.equal(second.status, 'saved');
    assert.notEqual(second.id, first.id);
  });

  test('the same text as another type, or in another channel, is a separate memory', async () => {
    const saved = await opened.store.save({ location: { channelId: 'c2' }, content: 'Erin prefers dark mode in every editor she uses', memoryType: 'preference' });
    assert.equal(saved.status, 'saved');
    const other = await opened.store.save({ location: { channelId: 'c1' }, content: 'Ship the release candidate on Friday', memoryType: 'todo' });
    const otherType = await opened.store.save({ location: { channelId: 'c1' }, content: 'Ship the release candidate on Friday!', memoryType: 'goal' });
    assert.notEqual(other.id, otherType.id);
    assert.equal(otherType.status, 'saved');
  });

  test('the store refuses bad input with an InputError naming the field', async () => {
    const location = { channelId: 'c1' };
    await assert.rejects(opened.store.save({ location, content: '   ', memoryType: 'fact' }), /content must not be empty/);
    await assert.rejects(opened.store.save({ location, content: 'x', memoryType: 'nonsense' as never }), /memory_type must be one of/);
    await assert.rejects(opened.store.save({ location, content: 'x', memoryType: 'fact', importance: 1.5 }), /importance must be a number from 0 to 1/);
    await assert.rejects(opened.store.save({ location, content: 'x'.repeat(5000), memoryType: 'fact' }), /limit is 4000/);
    await assert.rejects(opened.store.search({ location, query: 'x', limit: 21 }), /limit must be an integer from 1 to 20/);
    await assert.rejects(opened.store.search({ location, query: '' }), /query must not be empty/);
  });
});

describe('scoping', () => {
  test('a channel never sees another channel, DMs belong to their user, wider scopes only when configured', async () => {
    for (const scope of ['channel', 'guild', 'global'] as const) {
      const opened = await openTestStore({ scope });
      try {
        const { store } = opened;
        // Guild scope shares only between channels whose (equal) view permissions are on record.
        for (const channelId of ['alpha', 'beta']) await store.recordChannelView?.({ channelId, guildId: 'g1', viewKey: 'everyone' });
        await store.save({ location: { channelId: 'alpha', guildId: 'g1' }, content: 'The launch codeword is periwinkle', memoryType: 'fact' });
        await store.save({ location: { channelId: 'dm-1', dmUserId: 'user-1' }, content: 'My favourite periwinkle scarf is blue', memoryType: 'preference' });
        await store.archiveTranscript([
          { ...message('alpha', 'a1', 'Fay', 'periwinkle is also the name of our transcript secret'), guildId: 'g1' },
        ]);
        const search = async (location: { channelId: string; guildId?: string; dmUserId?: string }) =>
          (await store.search({ location, query: 'periwinkle', limit: 20 })).map((result) => result.content);

        const inAlpha = await search({ channelId: 'alpha', guildId: 'g1' });
        assert.ok(inAlpha.some((content) => content.includes('codeword')), `${scope}: own memory visible`);
        assert.ok(inAlpha.some((content) => content.includes('transcript secret')), `${scope}: own transcript visible`);

        const inBeta = await search({ channelId: 'beta', guildId: 'g1' });
        const inOtherGuild = await search({ channelId: 'gamma', guildId: 'g2' });
        const sameUserDm = await search({ channelId: 'dm-1', dmUserId: 'user-1' });
        const otherUserDm = await search({ channelId: 'dm-2', dmUserId: 'user-2' });
        // Transcripts never cross channels, whatever the scope.
        for (const results of [inBeta, inOtherGuild, sameUserDm, otherUserDm]) {
          assert.ok(!results.some((content) => content.includes('transcript secret')), `${scope}: transcript leaked`);
        }
        assert.ok(sameUserDm.some((content) => content.includes('scarf')), `${scope}: the DM user sees their memory`);
        if (scope === 'channel') {
          assert.deepEqual(inBeta, []);
          assert.deepEqual(inOtherGuild, []);
          assert.deepEqual(otherUserDm, []);
          assert.ok(!sameUserDm.some((content) => content.includes('codeword')));
          assert.ok(!inAlpha.some((content) => content.includes('scarf')));
        } else if (scope === 'guild') {
          assert.ok(inBeta.some((content) => content.includes('codeword')), 'guild scope: same guild sees it');
          assert.deepEqual(inOtherGuild, []);
          assert.ok(!otherUserDm.some((content) => content.includes('scarf')));
        } else {
          assert.ok(inOtherGuild.some((content) => content.includes('codeword')), 'global scope: everyone sees channel memories');
          assert.ok(otherUserDm.some((content) => content.includes('codeword')));
          // What a user said in DMs stays theirs, even under the global scope.
          for (const results of [inAlpha, inBeta, inOtherGuild, otherUserDm]) {
            assert.ok(!results.some((content) => content.includes('scarf')), 'global scope: a DM memory leaked');
          }
        }
      } finally {
        await opened.close();
      }
    }
  });
});

describe('transcript archive and hybrid search', () => {
  let opened: OpenedStore;
  before(async () => {
    opened = await openTestStore();
    await opened.store.archiveTranscript([
      message('room', '100', 'Alice', 'Has anyone tried the new ramen place on Fifth Street?', 1_000),
      message('room', '101', 'Bob', 'Yes! The tonkotsu broth was incredible, I went on Saturday', 2_000),
      message('room', '102', 'Carol', 'I am flying to Reykjavik in March for the northern lights', 3_000),
      message('room', '103', 'Dave', 'Reminder: the quarterly budget review moved to Thursday', 4_000),
      message('room', '104', 'Alice', 'Can someone water my tomato plants while I am away?', 5_000),
    ]);
  });
  after(async () => opened.close());
  const location = { channelId: 'room' };

  test('archiving is idempotent per (channel, message id)', async () => {
    await opened.store.archiveTranscript([message('room', '101', 'Bob', 'Yes! The tonkotsu broth was incredible, I went on Saturday', 2_000)]);
    assert.equal((await opened.store.stats(location)).transcriptEntries, 5);
  });

  test('the relevant entry ranks first and carries speaker, message id and time', async () => {
    const results = await opened.store.search({ location, query: 'Who is travelling to Iceland to see the northern lights?' });
    assert.ok(results.length > 0);
    // The hit names the message that matched, and brings the two messages before and after it
    // as separate, labelled neighbours; source_ids lists all five, in order.
    assert.equal(results[0]!.content, 'Carol: I am flying to Reykjavik in March for the northern lights');
    assert.equal(results[0]!.message_id, '102');
    assert.equal(results[0]!.author, 'Carol');
    assert.deepEqual(
      results[0]!.neighbors!.map((item) => [item.position, item.message_id, item.author, item.content]),
      [
        ['before', '100', 'Alice', 'Has anyone tried the new ramen place on Fifth Street?'],
        ['before', '101', 'Bob', 'Yes! The tonkotsu broth was incredible, I went on Saturday'],
        ['after', '103', 'Dave', 'Reminder: the quarterly budget review moved to Thursday'],
        ['after', '104', 'Alice', 'Can someone water my tomato plants while I am away?'],
      ],
    );
    assert.equal(results[0]!.kind, 'transcript');
    assert.deepEqual(results[0]!.source_ids, ['100', '101', '102', '103', '104']);
    assert.equal(results[0]!.created_at, new Date(3_000).toISOString());
    assert.ok(results[0]!.score > 0.3, `score ${results[0]!.score}`);
    for (const result of results) assert.ok(result.score >= 0 && result.score <= 1);
  });

  test('scores never rise down the list of results', async () => {
    for (const query of ['Alice plants ramen', 'Saturday broth Thursday review', 'lights in March', 'who went where']) {
      const results = await opened.store.search({ location, query, limit: 20 });
      for (let index = 1; index < results.length; index += 1) {
        assert.ok(results[index]!.score <= results[index - 1]!.score, `${query}: ${results.map((result) => result.score).join(', ')}`);
      }
    }
  });

  test('a speaker name finds what that person said', async () => {
    const results = await opened.store.search({ location, query: 'What did Dave say?' });
    assert.ok(results[0]!.source_ids.includes('103'));
    assert.match(results[0]!.content, /^Dave: Reminder/m);
  });

  test('text sharing neither words nor meaning with the query scores near zero', async () => {
    const results = await opened.store.search({ location, query: 'quantum chromodynamics lattice gauge', limit: 20 });
    for (const result of results) assert.ok(result.score < 0.1, `${result.content} scored ${result.score}`);
  });

  test('any user text is a valid query (FTS5 syntax is quoted away)', async () => {
    for (const query of ['"unbalanced', 'NEAR(a b) OR AND NOT', 'col:value*', '(((', '— … 🙂', 'ramen^2 -broth']) {
      const results = await opened.store.search({ location, query });
      assert.ok(Array.isArray(results));
    }
  });

  test('a search right after an insert finds it, before the index catches up', async () => {
    await opened.store.archiveTranscript([message('room', '105', 'Erin', 'The wifi password is now marmalade-42', 6_000)]);
    const results = await opened.store.search({ location, query: 'wifi password' });
    assert.ok(results[0]!.source_ids.includes('105'));
  });

  test('an edited message is found by its new text only; a deleted one is gone', async () => {
    await opened.store.updateTranscript('room', [{ messageId: '104', content: 'Can someone feed my goldfish while I am away?' }]);
    const goldfish = await opened.store.search({ location, query: 'goldfish' });
    assert.match(goldfish[0]!.content, /^Alice: Can someone feed my goldfish while I am away\?$/m);
    const tomato = await opened.store.search({ location, query: 'tomato plants', limit: 20 });
    assert.ok(!tomato.some((result) => result.content.includes('tomato')));

    await opened.store.whenIndexed();
    await opened.store.deleteTranscript('room', ['101']);
    const ramen = await opened.store.search({ location, query: 'tonkotsu broth Saturday', limit: 20 });
    assert.ok(!ramen.some((result) => result.source_ids.includes('101')));
    assert.equal((await opened.store.stats(location)).transcriptEntries, 5);
  });

  test('kind and memory_type filters apply before the top k is cut', async () => {
    await opened.store.save({ location, content: 'Alice travels a lot and needs plant sitters', memoryType: 'observation' });
    await opened.store.save({ location, content: 'Alice wants someone to feed her goldfish', memoryType: 'todo' });
    const memories = await opened.store.search({ location, query: 'Alice goldfish', kind: 'memory', limit: 1 });
    assert.equal(memories.length, 1);
    assert.equal(memories[0]!.kind, 'memory');
    const todos = await opened.store.search({ location, query: 'Alice', memoryType: 'todo', limit: 5 });
    assert.ok(todos.length >= 1);
    assert.ok(todos.every((result) => result.memory_type === 'todo'));
    const transcripts = await opened.store.search({ location, query: 'Alice goldfish', kind: 'transcript', limit: 3 });
    assert.ok(transcripts.every((result) => result.kind === 'transcript'));
  });

  test('forget removes an entry from every index', async () => {
    const results = await opened.store.search({ location, query: 'quarterly budget review' });
    const id = results[0]!.id;
    assert.equal(await opened.store.forget(id), true);
    assert.equal(await opened.store.forget(id), false);
    assert.equal(await opened.store.forget('not-an-id'), false);
    const again = await opened.store.search({ location, query: 'quarterly budget review', limit: 20 });
    assert.ok(!again.some((result) => result.id === id));
  });
});

describe('edits and deletes reach the vectors at once', () => {
  const said = 'call me on 555 0199 about the lighthouse';
  const edited = 'the ferry timetable changed to noon';
  const found = (results: readonly SearchResult[], messageId: string): boolean => results.some((result) => result.source_ids.includes(messageId));

  test('a store of one message, edited, is searched at once: its new words find it, its old words never do', async () => {
    // Alone in the store, a word is in every row and BM25 gives it no weight: the match rests on
    // the vector side, which must meet the new text from the moment the edit resolved, whether
    // the edit came before the background embedding, during it or after it.
    for (const delayMs of [0, 2, 4, 6, 8, 10, 12, 14]) {
      await withOfflineApp('magpie-edit-', async ({ runtime, memory }) => {
        const location = { channelId: 'c-edit' };
        await runtime.ingest({ messageId: 'm1', channelId: 'c-edit', authorId: 'u-ana', authorName: 'Ana', role: 'user', content: said, createdAt: Date.UTC(2026, 0, 1) });
        await sleep(delayMs);
        assert.equal(await runtime.editMessage('c-edit', 'm1', edited), true);
        const fresh = await memory.search({ location, query: 'ferry timetable' });
        assert.ok(found(fresh, 'm1'), `edited ${delayMs} ms after it came in, found by its new words: ${JSON.stringify(fresh)}`);
        for (const query of ['lighthouse', '555 0199', said]) {
          const stale = await memory.search({ location, query });
          assert.deepEqual(stale, [], `edited ${delayMs} ms after it came in, not found by "${query}"`);
        }
      });
    }
  });

  test('edits racing the background embedding leave no vector of an old text behind', async () => {
    const opened = await openTestStore();
    try {
      const { store, db } = opened;
      const stage = store.transcriptStager(db)!;
      const channels = Array.from({ length: 24 }, (_, index) => `c${index}`);
      // Each message staged as ingest stages it (its vector owed), then edited a little later:
      // some edits land before the backlog reads the row, some while it writes, some after.
      await Promise.all(
        channels.map(async (channelId, index) => {
          await db.transaction(() => stage([message(channelId, 'm1', 'Ana', `${said} ${index}`)]));
          await sleep(index % 12);
          await store.updateTranscript(channelId, [{ messageId: 'm1', content: `${edited} ${index}` }]);
        }),
      );
      for (const channelId of channels) {
        assert.ok(found(await store.search({ location: { channelId }, query: 'ferry timetable' }), 'm1'), `${channelId}: found by its new words`);
        assert.deepEqual(await store.search({ location: { channelId }, query: 'lighthouse' }), [], `${channelId}: not by its old ones`);
      }
      await store.whenIndexed();
      const hashing = new HashingEmbedder({ dimension: DEFAULTS.memory.hashDimension });
      const rows = (await db.prepare('SELECT i.content, v.vector FROM memory_items i JOIN memory_vectors v ON v.item_rowid = i.rowid').all()) as Array<{
        content: string;
        vector: Buffer;
      }>;
      assert.equal(rows.length, channels.length, 'every message has its vector');
      const made = await hashing.embed(rows.map((row) => row.content));
      rows.forEach((row, position) => {
        assert.ok(dot(blobToVector(row.vector), made[position]!) > 0.999, `the vector of "${row.content}" is made from that text`);
      });
    } finally {
      await opened.close();
    }
  });

  test('an index that holds the old vector does not answer for an edited message or a rewritten memory', async () => {
    const opened = await openTestStore();
    try {
      const { store } = opened;
      const location = { channelId: 'room' };
      await store.archiveTranscript([message('room', 'm1', 'Ana', said)]);
      // Drawn from the message and another, it is restated (not deleted) when the message changes.
      await store.save({ location, content: 'Ana keeps the lighthouse keys', memoryType: 'fact', sourceIds: ['m1', 'm0'] });
      // The channel's index is loaded and has taken in both vectors.
      assert.ok(found(await store.search({ location, query: 'lighthouse' }), 'm1'));
      await store.whenIndexed();

      await store.updateTranscript('room', [{ messageId: 'm1', content: edited }]);
      const [memory] = (await store.dropSources('room', ['m1'], { rewrite: true })).rewriting;
      assert.equal(await store.finishRewrite(memory!.id, { content: 'Ana keeps the harbour keys', sourceIds: ['m0'] }), 'rewritten');
      assert.deepEqual(await store.search({ location, query: 'lighthouse' }), []);
      assert.deepEqual(await store.search({ location, query: 'lighthouse 555 0199' }), []);
      assert.ok(found(await store.search({ location, query: 'ferry timetable' }), 'm1'));
      const keys = await store.search({ location, query: 'harbour keys', kind: 'memory' });
      assert.equal(keys[0]?.content, 'Ana keeps the harbour keys');
    } finally {
      await opened.close();
    }
  });

  test('a deleted message is not found through its vector, written or still owed', async () => {
    const opened = await openTestStore();
    try {
      const { store, db } = opened;
      const location = { channelId: 'room' };
      // One whose vector is in the loaded index, one whose vector is still owed.
      await store.archiveTranscript([message('room', 'm1', 'Ana', said)]);
      assert.ok(found(await store.search({ location, query: 'lighthouse' }), 'm1'));
      await store.whenIndexed();
      await db.transaction(() => store.transcriptStager(db)!([message('room', 'm2', 'Ana', 'the lighthouse lamp needs a new bulb')]));
      await store.deleteTranscript('room', ['m1', 'm2']);
      for (const query of ['lighthouse', 'call me about the lighthouse', 'lighthouse lamp bulb']) {
        assert.deepEqual(await store.search({ location, query }), [], query);
      }
      const left = (await db.prepare('SELECT (SELECT COUNT(*) FROM memory_vectors) AS vectors, (SELECT COUNT(*) FROM memory_vector_backlog) AS owed').get()) as {
        vectors: number;
        owed: number;
      };
      assert.deepEqual([Number(left.vectors), Number(left.owed)], [0, 0], 'no vector is left, none is owed');
    } finally {
      await opened.close();
    }
  });
});
