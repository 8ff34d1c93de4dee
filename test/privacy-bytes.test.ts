/**
 * Deleted means gone down to the bytes: a message the bot quoted in its reply, saved as a memory
 * together with another message, and found by a search, is deleted in Discord. Afterwards the
 * raw files (the SQLite database, its WAL, every index file) hold neither its text nor its
 * vector, what the database serves holds neither (on PostgreSQL too), and the bot's reply in
 * Discord no longer quotes it.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { RecordedRequest } from './fakes/fake-anthropic.js';
import { ALICE, BOB, GENERAL, isAgentRequest, isMemoryRestateRequest, startTestBot, waitUntil, type TestBot } from './discord-helpers.js';
import { TEST_STORAGE } from './support/storage.js';
import { closestWindow } from './support/vector-bytes.js';

const SECRET = 'the boathouse key hides under the loose blue brick near gate nine';
const OTHER = 'the boathouse opens at seven on weekdays and closes at dusk';
/** Stretches of the secret that a copy would carry (a whole-word FTS token list would not). */
const FRAGMENTS = ['loose blue brick near gate', 'key hides under the loose'];

let bot: TestBot;
before(async () => {
  bot = await startTestBot();
});
after(async () => bot.close());

function hasToolResult(request: RecordedRequest): boolean {
  const last = request.body.messages.at(-1);
  return Array.isArray(last?.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
}

/** Every file of the data dir, recursively (database, WAL, index files and their sidecars). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? filesUnder(file) : [file];
  });
}

test('with [privacy] edit_own_replies = false, the stored reply loses the quote and the Discord copy is left alone', async () => {
  const note = 'the ferry timetable changes on the first Monday of April';
  const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: note });
  bot.model.setDefault((request) => (isAgentRequest(request.body) ? { text: `Noted: "${note}", thanks.` } : { status: 500 }));
  const ask = bot.discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'did you get that?', mentionsBot: true });
  const reply = await bot.discord.waitForPost((message) => message.messageReference?.message_id === ask, { timeoutMs: 10_000 });
  await bot.adapter.idle();
  assert.ok((await bot.app.runtime.liveContext(GENERAL)).entries.some((entry) => entry.messageId === id), 'precondition: recorded');
  const current = bot.app.config.current();
  bot.app.config.replace({ ...current, privacy: { editOwnReplies: false } });
  try {
    const since = bot.events.length;
    bot.discord.deleteMessage({ channelId: GENERAL, messageId: id });
    await waitUntil(() => bot.events.slice(since).some((event) => event.type === 'deletion_propagated' && event.own_replies_redacted === 1), 'propagated');
    await bot.adapter.idle();
    const stored = (await bot.app.runtime.liveContext(GENERAL)).entries.find((entry) => entry.messageId === reply.id);
    assert.equal(stored?.content, 'Noted: "[deleted message]", thanks.');
    assert.ok(bot.discord.contentOf(reply.id)?.includes(note), 'Discord keeps what the bot posted');
    assert.ok(!bot.events.slice(since).some((event) => event.type === 'own_reply_edited'));
  } finally {
    bot.app.config.replace(current);
  }
});

test('an edit applies to a stored message even after its author was blocked', async () => {
  const id = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'my locker combination is 31-07-22' });
  await waitUntil(async () => (await bot.app.runtime.liveContext(GENERAL)).entries.some((entry) => entry.messageId === id), 'recorded');
  const current = bot.app.config.current();
  bot.app.config.replace({ ...current, discord: { ...current.discord, blockedUsers: [ALICE] } });
  try {
    const since = bot.events.length;
    bot.discord.editMessage({ messageId: id, content: 'never mind' });
    await waitUntil(() => bot.events.slice(since).some((event) => event.type === 'message_edited'), 'edit applied');
    const stored = (await bot.app.runtime.liveContext(GENERAL)).entries.find((entry) => entry.messageId === id);
    assert.equal(stored?.content, 'never mind');
  } finally {
    bot.app.config.replace(current);
  }
});

test('a deleted message leaves no byte of its text or vector on disk, in the database, or in the bot\'s Discord reply', async () => {
  const secret = bot.discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: SECRET });
  const other = bot.discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: OTHER });
  await waitUntil(
    async () => (await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'boathouse key loose blue brick' })).length > 0,
    'the secret is searchable',
  );
  const restated = 'The boathouse opens at seven on weekdays and closes at dusk.';
  bot.model.setDefault((request) => {
    if (isMemoryRestateRequest(request.body)) return { text: restated };
    if (!isAgentRequest(request.body)) return { status: 500 };
    if (hasToolResult(request)) return { text: `Alice told us: "${SECRET}". And it opens at seven.` };
    return {
      toolUse: [
        { name: 'memory_search', input: { query: 'boathouse key' } },
        {
          name: 'memory_save',
          input: {
            content: 'The boathouse key hides under the loose blue brick near gate nine; it opens at seven.',
            memory_type: 'fact',
            source_ids: [secret, other],
          },
        },
      ],
    };
  });
  const ask = bot.discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'where is the boathouse key again?', mentionsBot: true });
  const reply = await bot.discord.waitForPost((message) => message.messageReference?.message_id === ask, { timeoutMs: 10_000 });
  await bot.adapter.idle();
  assert.ok(bot.discord.contentOf(reply.id)?.includes(SECRET), 'precondition: the reply quotes the message');
  const memory = (await bot.app.memory.list({ location: { channelId: GENERAL }, kind: 'memory' })).find((item) => item.content.includes('boathouse'));
  assert.deepEqual(memory?.sourceIds.sort(), [secret, other].sort(), 'precondition: a memory drawn from both messages');
  const stored = (await bot.app.db
    .prepare(`SELECT v.vector AS vector FROM memory_vectors v JOIN memory_items i ON i.rowid = v.item_rowid WHERE i.message_id = ? AND i.kind = 'transcript'`)
    .get(secret)) as { vector: Buffer } | undefined;
  assert.ok(stored, 'precondition: the message has a vector');
  const blob = Buffer.from(stored.vector);
  const vector = new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.length));
  // The bot's reply quoted it: the reply's archived vector encodes the quote too.
  const replyVectorRow = bot.app.db.prepare(`SELECT v.vector AS vector FROM memory_vectors v JOIN memory_items i ON i.rowid = v.item_rowid WHERE i.message_id = ?`);
  await waitUntil(async () => (await replyVectorRow.get(reply.id)) !== undefined, 'the reply archived with its vector');
  const replyBlob = Buffer.from(((await replyVectorRow.get(reply.id)) as { vector: Buffer }).vector);
  const replyVector = new Float32Array(replyBlob.buffer.slice(replyBlob.byteOffset, replyBlob.byteOffset + replyBlob.length));

  const since = bot.events.length;
  bot.discord.deleteMessage({ channelId: GENERAL, messageId: secret });
  await waitUntil(() => bot.events.slice(since).some((event) => event.type === 'own_reply_edited'), 'the reply edited in Discord');
  await waitUntil(() => bot.events.slice(since).some((event) => event.type === 'memory_rewritten'), 'the memory restated by the model');
  await waitUntil(
    async () => ((await bot.app.db.prepare('SELECT COUNT(*) AS owed FROM memory_vector_backlog').get()) as { owed: number }).owed === 0,
    'the rewritten memory embedded again',
  );

  const cleared = TEST_STORAGE === 'sqlite' ? 'erasure_checkpointed' : 'erasure_vacuumed';
  assert.ok(bot.events.slice(since).some((event) => event.type === cleared), `${cleared} after the delete`);
  if (TEST_STORAGE === 'sqlite') {
    // A checkpoint that met a reader is tried again until it clears the whole WAL.
    const last = bot.events.slice(since).filter((event) => event.type === cleared).at(-1)!;
    assert.equal(last.busy, 0, 'the last checkpoint cleared the whole WAL');
  }

  // Discord: the bot's reply says a message was deleted instead of quoting it.
  const shown = bot.discord.contentOf(reply.id) ?? '';
  assert.ok(!shown.includes('loose blue brick'), shown);
  assert.match(shown, /\[deleted message\]/);
  assert.match(shown, /opens at seven/, 'the rest of the reply stays');

  // What the database serves, on either backend.
  for (const table of ['history_entries', 'history_summaries', 'memory_items', 'worker_tasks']) {
    const column = table === 'worker_tasks' ? 'task' : 'content';
    for (const fragment of FRAGMENTS) {
      const rows = await bot.app.db.prepare(`SELECT ${column} AS text FROM ${table} WHERE lower(${column}) LIKE ?`).all(`%${fragment}%`);
      assert.deepEqual(rows, [], `${table} holds "${fragment}"`);
    }
  }
  const vectors = (await bot.app.db.prepare('SELECT vector FROM memory_vectors').all()) as Array<{ vector: Buffer }>;
  assert.ok(!vectors.some((row) => Buffer.from(row.vector).equals(blob)), 'the vector left the database');
  const kept = (await bot.app.memory.list({ location: { channelId: GENERAL }, kind: 'memory' })).find((item) => item.content.includes('opens at seven'));
  assert.equal(kept?.content, restated, 'the memory is restated from the other message');
  assert.deepEqual(kept?.sourceIds, [other], 'the memory stays, drawn from the other message only');
  const restate = bot.model.requests.find((request) => isMemoryRestateRequest(request.body));
  assert.ok(restate && JSON.stringify(restate.body).includes(OTHER), 'the model was given the remaining message');
  assert.ok(!JSON.stringify(restate.body).includes('loose blue brick'), 'and never the deleted one, nor the memory\'s quote of it');

  // The raw files: while the bot runs, and after it closed.
  const checkFiles = (when: string) => {
    const files = filesUnder(bot.dataDir);
    assert.ok(files.some((file) => file.endsWith('.hnsw')), 'an index file was written');
    for (const file of files) {
      const bytes = readFileSync(file);
      for (const fragment of FRAGMENTS) assert.ok(!bytes.includes(Buffer.from(fragment)), `${when}: ${path.basename(file)} holds "${fragment}"`);
      assert.ok(!bytes.includes(blob.subarray(0, 64)), `${when}: ${path.basename(file)} holds the vector's bytes`);
      if (file.endsWith('.hnsw')) {
        const closest = closestWindow(bytes, vector);
        assert.ok(closest < 0.99, `${when}: ${path.basename(file)} holds a vector at cosine ${closest.toFixed(3)}`);
        const quoting = closestWindow(bytes, replyVector);
        assert.ok(quoting < 0.99, `${when}: ${path.basename(file)} holds the quoting reply's old vector at cosine ${quoting.toFixed(3)}`);
      }
    }
    if (TEST_STORAGE === 'sqlite') {
      const wal = path.join(bot.dataDir, 'magpie.sqlite-wal');
      assert.ok(!existsSync(wal) || statSync(wal).size < 16 * 1024 * 1024, 'the WAL stays bounded');
    }
  };
  checkFiles('running');
  await bot.adapter.stop(1_000);
  await bot.app.close();
  checkFiles('closed');
});
