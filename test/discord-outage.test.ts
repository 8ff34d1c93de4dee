/**
 * Outages: the gateway comes back without resuming (or the bot restarts) while messages arrive,
 * and the disk fills up under a running bot. Real discord.js against the fake Discord, real
 * Anthropic SDK against the fake Messages API, real SQLite.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { CatchUpPoints } from '../src/channel/catch-up-points.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { createDiscordClient, DiscordAdapter } from '../src/discord/index.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { startFakeDiscord, type FakeDiscord } from './fakes/fake-discord.js';
import { ALICE, BOB, GENERAL, isAgentRequest, lastUserText, QUIET, testConfig, waitUntil } from './discord-helpers.js';
import { appEnv, TEST_STORAGE } from './support/storage.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-outage-'));
const mounts: string[] = [];
after(() => {
  for (const mount of mounts) spawnSync('umount', [mount]);
  rmSync(root, { recursive: true, force: true });
});

interface Bot {
  app: MagpieApp;
  adapter: DiscordAdapter;
  events: MagpieEvent[];
  stop(): Promise<void>;
}

async function startBot(options: { discord: FakeDiscord; model: FakeAnthropic; dataDir: string; catchUpMessages?: number }): Promise<Bot> {
  const config = testConfig({
    baseUrl: options.model.baseUrl,
    dataDir: options.dataDir,
    discord: { ...(options.catchUpMessages ? { catchUpMessages: options.catchUpMessages } : {}) },
  });
  const stream = new EventStream();
  const events: MagpieEvent[] = [];
  stream.subscribe((event) => events.push(event));
  const app = await openApp({ config, env: appEnv(), events: stream, command: 'magpie start' });
  const adapter = new DiscordAdapter({
    client: createDiscordClient({ restApi: options.discord.restApi }),
    runtime: app.runtime,
    responder: app.responder,
    memory: app.memory,
    config: app.config,
    events: stream,
    storage: app.storage,
    dataDir: app.dataDir,
    catchUp: new CatchUpPoints(app.db),
    storageRetryDelaysMs: [100, 200, 400, 800, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
  });
  await adapter.start('test-token');
  return {
    app,
    adapter,
    events,
    async stop() {
      await adapter.stop(1_000);
      await app.close();
    },
  };
}

const OLD_LOCKER = 'my gym locker code is otter marmalade nine four';
/** Stretches of the old text that a copy would carry (the full-text index keeps single words). */
const OLD_FRAGMENTS = ['gym locker code is otter', 'otter marmalade nine'];

/** Every file under `dir` (the database, its WAL, index files): none may hold a fragment. */
function assertNoBytes(dir: string, fragments: readonly string[], when: string): void {
  const files = (function walk(at: string): string[] {
    return readdirSync(at).flatMap((name) => {
      const file = path.join(at, name);
      return statSync(file).isDirectory() ? walk(file) : [file];
    });
  })(dir);
  for (const file of files) {
    const bytes = readFileSync(file);
    for (const fragment of fragments) assert.ok(!bytes.includes(Buffer.from(fragment)), `${when}: ${path.basename(file)} holds "${fragment}"`);
  }
}

async function messageIds(app: MagpieApp, channelId: string): Promise<string[]> {
  return ((await app.db.prepare("SELECT message_id FROM history_entries WHERE channel_id = ? AND kind = 'message' ORDER BY seq").all(channelId)) as Array<{
    message_id: string;
  }>).map((row) => row.message_id);
}

async function fakes(): Promise<{ discord: FakeDiscord; model: FakeAnthropic }> {
  const discord = await startFakeDiscord({
    users: [
      { id: ALICE, username: 'alice', globalName: 'Alice' },
      { id: BOB, username: 'bob' },
    ],
    channels: [
      { id: GENERAL, name: 'general', type: 0 },
      { id: QUIET, name: 'quiet', type: 0 },
    ],
  });
  const model = await startFakeAnthropic();
  model.setDefault((request) => (isAgentRequest(request.body) ? { text: `echo: ${lastUserText(request.body).slice(-60)}` } : { text: 'A short summary.' }));
  return { discord, model };
}

describe('nothing missed across an outage', { timeout: 120_000 }, () => {
  test('a reconnect without resume fetches what was missed, in order, once, before answering again', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'reconnect');
    const bot = await startBot({ discord, model, dataDir });
    try {
      const before = [1, 2, 3].map((index) => discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: `before ${index}` }));
      const quietBefore = discord.sendMessage({ channelId: QUIET, authorId: BOB, content: 'quiet before' });
      await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 3 && (await messageIds(bot.app, QUIET)).length === 1, 'live messages stored');

      discord.dropSession();
      // Sent in the same tick as the drop: the client cannot be back yet, so only REST has them.
      const missed = Array.from({ length: 130 }, (_, index) =>
        discord.sendMessage({ channelId: GENERAL, authorId: index % 2 ? ALICE : BOB, content: `missed ${index}` }),
      );
      const quietMissed = discord.sendMessage({ channelId: QUIET, authorId: BOB, content: 'quiet missed' });

      await waitUntil(
        () =>
          [GENERAL, QUIET].every((channelId) =>
            bot.events.some((event) => event.type === 'catch_up_completed' && event.reason === 'new_session' && event.channel_id === channelId),
          ),
        'catch-up after the new session',
        60_000,
      );
      assert.ok(discord.handshakes.filter((handshake) => handshake.op === 2).length >= 2, 'the client identified again (no resume)');
      // The operator's view of it: the first attempt told, then the session back, with how long it took.
      const reconnecting = bot.events.find((event) => event.type === 'discord_reconnecting');
      assert.equal(reconnecting?.attempt, 1, JSON.stringify(reconnecting));
      assert.equal(reconnecting?.shard_id, 0);
      const back = bot.events.find((event) => event.type === 'discord_reconnected');
      assert.ok(back && back.resumed === false && Number(back.attempts) >= 1 && Number(back.down_ms) >= 0, JSON.stringify(back));
      const done = bot.events.find((event) => event.type === 'catch_up_completed' && event.channel_id === GENERAL && event.reason === 'new_session');
      // At least the 130 missed; on a network store the page may also repeat the newest message
      // stored before the drop (its row still in flight when the point was read), which is
      // stored once all the same: "each once" is checked on the rows below.
      assert.ok((done?.messages as number) >= 130 && (done?.messages as number) <= 131, `fetched ${String(done?.messages)}`);
      assert.ok(discord.historyRequests.filter((request) => request.channelId === GENERAL).length >= 2, 'paged with after=');

      // The next mention is answered with the missed messages in its context, before it.
      const asking = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'what did I miss?', mentionsBot: true });
      await discord.waitForPost((posted) => posted.messageReference?.message_id === asking, { timeoutMs: 20_000 });
      const request = model.requests.find((recorded) => lastUserText(recorded.body).includes('what did I miss?'))!;
      const sent = JSON.stringify(request.body);
      assert.ok(sent.indexOf('missed 0') < sent.indexOf('missed 129') && sent.indexOf('missed 129') < sent.indexOf('what did I miss?'));

      assert.deepEqual((await messageIds(bot.app, GENERAL)).slice(0, 3 + 130 + 1), [...before, ...missed, asking], 'in order, each once');
      assert.deepEqual(await messageIds(bot.app, QUIET), [quietBefore, quietMissed]);
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });

  test('a reply the bot posts while the gateway is down does not hide the messages written before it', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'reply-during-outage');
    const bot = await startBot({ discord, model, dataDir });
    try {
      model.setDefault((request) => (isAgentRequest(request.body) ? { delayMs: 500, then: { text: 'a considered answer' } } : { text: 'A short summary.' }));
      const asked = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'a question', mentionsBot: true });
      await waitUntil(() => model.inFlight > 0, 'the answer on its way');
      // The session is gone and stays gone until the reply has been posted through REST.
      discord.holdIdentify();
      discord.dropSession();
      const meanwhile = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'written while the bot was away' });
      await discord.waitForPost((posted) => posted.messageReference?.message_id === asked, { timeoutMs: 20_000 });
      discord.releaseIdentify();
      await waitUntil(
        () => bot.events.some((event) => event.type === 'catch_up_completed' && event.reason === 'new_session' && event.channel_id === GENERAL),
        'catch-up after the new session',
        60_000,
      );
      assert.ok((await messageIds(bot.app, GENERAL)).includes(meanwhile), 'the message written during the outage is stored');
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });

  test('a message arriving as the new session starts waits for the catch-up: what was written before it is fetched, in order', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'live-at-ready');
    const bot = await startBot({ discord, model, dataDir });
    try {
      const first = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'first' });
      await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 1, 'first stored');
      discord.holdIdentify();
      discord.dropSession();
      const meanwhile = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'written while the bot was away' });
      await waitUntil(() => bot.events.some((event) => event.type === 'discord_reconnecting'), 'the bot reconnecting');
      const ready = discord.waitForReady(20_000);
      discord.releaseIdentify();
      await ready;
      // Delivered with the new session, while the catch-up is still reading where to start.
      const live = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'written right after the reconnect' });
      await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 3, 'all three stored', 30_000);
      assert.deepEqual(await messageIds(bot.app, GENERAL), [first, meanwhile, live]);
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });

  test('after a restart each active channel catches up (bounded per channel); a rerun stores nothing twice', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'restart');
    let bot = await startBot({ discord, model, dataDir, catchUpMessages: 40 });
    const first = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'first' });
    await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 1, 'first stored');
    await bot.stop();
    const whileDown = Array.from({ length: 60 }, (_, index) => discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: `down ${index}` }));
    bot = await startBot({ discord, model, dataDir, catchUpMessages: 40 });
    try {
      await waitUntil(() => bot.events.some((event) => event.type === 'catch_up_completed' && event.reason === 'start'), 'catch-up at start', 30_000);
      const done = bot.events.find((event) => event.type === 'catch_up_completed')!;
      assert.equal(done.messages, 40);
      assert.equal(done.truncated, true);
      assert.deepEqual(await messageIds(bot.app, GENERAL), [first, ...whileDown.slice(0, 40)]);
    } finally {
      await bot.stop();
    }
    // The next start goes on from the last one stored.
    bot = await startBot({ discord, model, dataDir, catchUpMessages: 40 });
    try {
      await waitUntil(() => bot.events.some((event) => event.type === 'catch_up_completed'), 'second catch-up', 30_000);
      assert.deepEqual(await messageIds(bot.app, GENERAL), [first, ...whileDown]);
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });
});

describe('deletes made while the bot was away', { timeout: 120_000 }, () => {
  test('a message deleted during the outage is gone after the restart; one older than the window is untouched', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'deletes-away');
    // Written two days ago and stored back then: older than the window the catch-up reconciles.
    const [old] = discord.seedHistory(GENERAL, [{ authorId: BOB, content: 'an old note about the lighthouse', at: Date.now() - 2 * 86_400_000 }]);
    let bot = await startBot({ discord, model, dataDir });
    await bot.app.runtime.ingest({
      messageId: old!,
      channelId: GENERAL,
      authorId: BOB,
      authorName: 'bob',
      role: 'user',
      content: 'an old note about the lighthouse',
      createdAt: Date.now() - 2 * 86_400_000,
    });
    const kept = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'the ferry leaves at noon' });
    const doomed = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'my locker code is walrus pineapple' });
    const last = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'see you on the pier' });
    await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 4, 'messages stored');
    await waitUntil(
      async () => (await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'locker code walrus pineapple' })).length > 0,
      'the message searchable',
      20_000,
    );
    await bot.stop();

    // Deleted on Discord while no gateway connection was there to tell the bot.
    discord.deleteMessage({ channelId: GENERAL, messageId: doomed });
    discord.deleteMessage({ channelId: GENERAL, messageId: old! });

    bot = await startBot({ discord, model, dataDir });
    try {
      await waitUntil(() => bot.events.some((event) => event.type === 'catch_up_completed' && event.channel_id === GENERAL), 'catch-up', 30_000);
      const reconciled = bot.events.find((event) => event.type === 'catch_up_deletes_reconciled' && event.channel_id === GENERAL);
      assert.ok(reconciled, 'one line says how far back the catch-up looked');
      assert.equal(reconciled.messages_checked, 3, 'the three messages of the last day');
      assert.equal(reconciled.deletes_applied, 1);
      assert.equal(reconciled.window_start_id, kept);
      assert.equal(JSON.stringify(reconciled).includes('walrus'), false, 'no message content in the line');

      assert.deepEqual(await messageIds(bot.app, GENERAL), [old, kept, last], 'the deleted one left history; the old one, outside the window, stayed');
      await bot.app.runtime.privacySettled();
      const found = await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'locker code walrus pineapple' });
      assert.equal(JSON.stringify(found).includes('walrus'), false, 'search no longer finds it');
      const stored = bot.app.db.prepare('SELECT content FROM history_entries WHERE channel_id = ?').all(GENERAL);
      assert.equal(JSON.stringify(stored).includes('walrus'), false);
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });
});

describe('edits made while the bot was away', { timeout: 120_000 }, () => {
  test('a message edited during the outage: its old text leaves the files, the new text is searchable', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'edits-away');
    let bot = await startBot({ discord, model, dataDir });
    const kept = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'the ferry leaves at noon' });
    const changed = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: OLD_LOCKER });
    const retouched = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'see you on the pier' });
    await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 3, 'messages stored');
    await waitUntil(
      async () => (await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'gym locker otter marmalade' })).length > 0,
      'the old text searchable',
      20_000,
    );
    await bot.stop();

    // Edited on Discord while no gateway connection was there to tell the bot; the second edit
    // leaves the text as it was (Discord still stamps it edited).
    discord.editMessage({ messageId: changed, content: 'never mind, the locker moved to the east hall' });
    discord.editMessage({ messageId: retouched, content: 'see you on the pier' });

    bot = await startBot({ discord, model, dataDir });
    try {
      await waitUntil(() => bot.events.some((event) => event.type === 'catch_up_completed' && event.channel_id === GENERAL), 'catch-up', 30_000);
      const reconciled = bot.events.find((event) => event.type === 'catch_up_deletes_reconciled' && event.channel_id === GENERAL);
      assert.equal(reconciled?.messages_checked, 3);
      assert.equal(reconciled?.edits_applied, 1, 'only the message whose text changed');
      assert.equal(reconciled?.deletes_applied, 0);
      assert.equal(JSON.stringify(reconciled).includes('marmalade'), false, 'no message content in the line');
      await bot.adapter.idle();
      await bot.app.runtime.privacySettled();

      const stored = (await bot.app.runtime.liveContext(GENERAL)).entries.find((entry) => entry.messageId === changed);
      assert.equal(stored?.content, 'never mind, the locker moved to the east hall');
      assert.deepEqual(await messageIds(bot.app, GENERAL), [kept, changed, retouched]);
      await waitUntil(
        async () => ((await bot.app.db.prepare('SELECT COUNT(*) AS owed FROM memory_vector_backlog').get()) as { owed: number }).owed === 0,
        'the edited message embedded again',
        20_000,
      );
      const found = await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'locker moved east hall' });
      assert.ok(found.some((result) => result.message_id === changed), 'the new text is searchable');
      const old = await bot.app.memory.search({ location: { channelId: GENERAL }, query: 'gym locker otter marmalade' });
      assert.equal(JSON.stringify(old).includes('marmalade'), false, 'search no longer finds the old text');
      for (const table of ['history_entries', 'memory_items']) {
        const rows = await bot.app.db.prepare(`SELECT content FROM ${table} WHERE lower(content) LIKE ?`).all('%otter marmalade%');
        assert.deepEqual(rows, [], `${table} holds the old text`);
      }
      const cleared = TEST_STORAGE === 'sqlite' ? 'erasure_checkpointed' : 'erasure_vacuumed';
      assert.ok(bot.events.some((event) => event.type === cleared && event.channel_id === GENERAL), `${cleared} after the edit`);
      assertNoBytes(dataDir, OLD_FRAGMENTS, 'running');
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
    assertNoBytes(dataDir, OLD_FRAGMENTS, 'closed');
  });
});

describe('deletes reconciled only where Discord answered', { timeout: 120_000 }, () => {
  test('a stored message below the range the pages covered is never taken for deleted', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'deletes-range');
    const hourAgo = Date.now() - 3_600_000;
    const [early] = discord.seedHistory(GENERAL, [{ authorId: BOB, content: 'an early note within the day', at: hourAgo - 3_600_000 }]);
    // Many messages the bot never stored push the early one past the pages reconciliation reads.
    discord.seedHistory(GENERAL, Array.from({ length: 350 }, (_, index) => ({ authorId: BOB, content: `unstored ${index}`, at: hourAgo + index })));
    let bot = await startBot({ discord, model, dataDir });
    await bot.app.runtime.ingest({
      messageId: early!,
      channelId: GENERAL,
      authorId: BOB,
      authorName: 'bob',
      role: 'user',
      content: 'an early note within the day',
      createdAt: hourAgo - 3_600_000,
    });
    const kept = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'kept' });
    const doomed = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'deleted while away' });
    await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 3, 'messages stored');
    await bot.stop();
    discord.deleteMessage({ channelId: GENERAL, messageId: doomed });

    bot = await startBot({ discord, model, dataDir });
    try {
      await waitUntil(() => bot.events.some((event) => event.type === 'catch_up_completed' && event.channel_id === GENERAL), 'catch-up', 30_000);
      const reconciled = bot.events.find((event) => event.type === 'catch_up_deletes_reconciled' && event.channel_id === GENERAL);
      assert.equal(reconciled?.messages_checked, 2, 'only the two stored ids inside the covered range');
      assert.equal(reconciled?.deletes_applied, 1);
      assert.deepEqual(await messageIds(bot.app, GENERAL), [early, kept], 'the early message, outside the covered range, stays');
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });
});

describe('edits and deletes while the bot starts', { timeout: 120_000 }, () => {
  test('a delete that comes while its channel catches up waits for the catch-up, then applies', async () => {
    const { discord, model } = await fakes();
    const dataDir = path.join(root, 'delete-during-start');
    let bot = await startBot({ discord, model, dataDir });
    const kept = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'kept' });
    const doomed = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'deleted as the bot comes back' });
    await waitUntil(async () => (await messageIds(bot.app, GENERAL)).length === 2, 'messages stored');
    await bot.stop();
    const whileDown = discord.sendMessage({ channelId: GENERAL, authorId: BOB, content: 'sent while down' });
    // The catch-up's first history read is held back, so the delete below arrives during it.
    discord.rateLimitHistory(1, 1);
    bot = await startBot({ discord, model, dataDir });
    try {
      // Sent once the catch-up is under way (its first read was answered 429), not before it began.
      await waitUntil(() => discord.historyRateLimited >= 1, 'catch-up started');
      discord.deleteMessage({ channelId: GENERAL, messageId: doomed });
      await waitUntil(() => bot.events.some((event) => event.type === 'catch_up_completed' && event.channel_id === GENERAL), 'catch-up', 30_000);
      await bot.adapter.idle();
      const completed = bot.events.findIndex((event) => event.type === 'catch_up_completed' && event.channel_id === GENERAL);
      const deletes = bot.events.flatMap((event, index) => (event.type === 'messages_deleted' && event.channel_id === GENERAL ? [index] : []));
      assert.ok(deletes.at(-1)! > completed, 'the live delete was applied after the catch-up, not dropped');
      assert.deepEqual(await messageIds(bot.app, GENERAL), [kept, whileDown]);
    } finally {
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });
});

describe('storage errors under a running bot', { timeout: 120_000 }, () => {
  test('a full disk: not ready, no reply to what could not be stored, retried with backoff, nothing accepted lost', async (context) => {
    if (TEST_STORAGE === 'postgres') {
      context.skip('on PostgreSQL the data dir holds no database to fill (postgres-store covers a lost server)');
      return;
    }
    const mountPoint = path.join(root, 'small-disk');
    mkdirSync(mountPoint);
    const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=3m', 'tmpfs', mountPoint]);
    if (mount.status !== 0) {
      context.skip(`cannot mount a tmpfs here (${mount.stderr?.toString().trim() || 'mount failed'}); CI runs as root, where this runs`);
      return;
    }
    mounts.push(mountPoint);
    const { discord, model } = await fakes();
    const bot = await startBot({ discord, model, dataDir: path.join(mountPoint, 'data') });
    const filler = path.join(mountPoint, 'filler');
    try {
      const accepted = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'stored before the disk filled', mentionsBot: true });
      const reply = await discord.waitForPost((posted) => posted.messageReference?.message_id === accepted, { timeoutMs: 20_000 });
      await waitUntil(async () => (await messageIds(bot.app, GENERAL)).includes(reply.id), 'the reply stored', 20_000);
      await bot.app.responder.idle();
      assert.equal(bot.adapter.storageHealthy, true);

      // Fill the disk to the last byte.
      const chunk = Buffer.alloc(64 * 1024, 1);
      for (let size = chunk.length; size >= 1; size = Math.floor(size / 2)) {
        for (;;) {
          try {
            writeFileSync(filler, chunk.subarray(0, size), { flag: 'a' });
          } catch {
            break;
          }
        }
      }
      const posts = discord.posted.length;
      // Messages keep coming. The first may still fit: WAL checkpoints run in a thread, so the
      // WAL is rewritten in place where a checkpoint freed it. One that needs a new page fails.
      let failing = '';
      for (let sent = 0; sent < 100 && bot.adapter.storageHealthy; sent += 1) {
        const id = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: `${'a long message '.repeat(300)} number ${sent} while the disk is full` });
        failing = id;
        await waitUntil(async () => !bot.adapter.storageHealthy || (await messageIds(bot.app, GENERAL)).includes(id), 'stored or refused', 20_000);
      }
      await waitUntil(() => !bot.adapter.storageHealthy, 'storage reported unhealthy', 20_000);
      // Asked while nothing can be stored: no reply until it is.
      const asked = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'are you there?', mentionsBot: true });
      assert.ok(bot.events.some((event) => event.type === 'storage_unhealthy' && String(event.error).includes('out of space')));
      assert.equal(bot.app.storage.healthy, false, 'the readiness flag is the app-wide one');
      await waitUntil(() => bot.events.filter((event) => event.type === 'message_store_retry').length >= 2, 'retries', 20_000);
      // A message may still be stored meanwhile (a checkpoint lets the WAL be rewritten in
      // place) and then get its reply: what must not happen is a reply to one that is not.
      const stored = await messageIds(bot.app, GENERAL);
      for (const post of discord.posted.slice(posts)) {
        const answered = post.messageReference?.message_id;
        assert.ok(answered !== undefined && stored.includes(answered), `no reply to a message that is not stored (posted ${JSON.stringify({ answered, content: post.content?.slice(0, 80) })})`);
      }

      rmSync(filler);
      await waitUntil(() => bot.adapter.storageHealthy, 'storage healthy again', 30_000);
      assert.ok(bot.events.some((event) => event.type === 'storage_recovered'));
      await waitUntil(async () => (await messageIds(bot.app, GENERAL)).includes(failing), 'the retried message stored', 20_000);
      await waitUntil(async () => (await messageIds(bot.app, GENERAL)).includes(asked), 'the question stored', 20_000);
      const ids = await messageIds(bot.app, GENERAL);
      assert.equal(ids.filter((id) => id === accepted).length, 1, 'the accepted message is kept');
      assert.equal(ids.filter((id) => id === failing).length, 1, 'stored once');
      assert.equal(ids.filter((id) => id === asked).length, 1, 'the question stored once');
    } finally {
      rmSync(filler, { force: true });
      await bot.stop();
      await model.close();
      await discord.close();
    }
  });
});
