/** The compaction log: what the events said, in SQLite, bounded in time, with usage samples. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openApp } from '../src/app/index.js';
import type { Clock } from '../src/common/clock.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { CompactionLog, LOGGED_EVENTS, readCompactionLog, tallyLog } from '../src/compaction-log/index.js';
import { LaggedScheduler } from '../src/compaction/scheduler.js';
import { checkConfigText } from '../src/config/index.js';
import { LiveConfig } from '../src/config/live-config.js';
import { openHarness, settle, tempDir, testConfig, TickingClock, userMessage } from './compaction-support.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { applyPgMigrations } from '../src/storage/postgres/pg-migrations.js';
import { PgPoolClient } from '../src/storage/postgres/pg-pool-client.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { appEnv, openTestDatabase, TEST_DATABASE_URL, TEST_STORAGE, withTestStorage } from './support/storage.js';
import { startDelayedPostgres } from './support/tcp-delay-proxy.js';

const DAY = 86_400_000;

class SettableClock implements Clock {
  constructor(public current: number) {}
  now(): number {
    return this.current;
  }
}

test('every compaction event is stored per channel with what the event said, plus usage samples and settings', async () => {
  const dir = tempDir();
  const stream = new EventStream();
  const clock = new TickingClock();
  // The log has a connection of its own to the data dir's database, as a reader would.
  const logDb = await openTestDatabase(dir.path);
  const logOnHarness = new CompactionLog({ db: logDb, clock, events: stream });
  const detach = logOnHarness.attach(stream);
  const config = new LiveConfig(testConfig({ contextWindow: 2000 }));
  const harness = await openHarness({ dir: dir.path, events: stream, clock, config, scheduler: new LaggedScheduler(6), usageObserver: logOnHarness });
  const runtime = harness.runtime;
  for (let index = 0; index < 260; index += 1) {
    await runtime.ingest(userMessage(index % 2 === 0 ? 'alpha' : 'beta', index, { words: 12 + (index % 9) * 6 }));
    if (index === 150) config.replace(testConfig({ contextWindow: 2400 }));
  }
  await runtime.flushCompactions();
  await settle();
  detach();
  await logOnHarness.close();
  await logDb.close();

  const logged = await readCompactionLog(harness.db);
  assert.deepEqual(logged.map((channel) => channel.channelId), ['alpha', 'beta']);
  for (const channel of logged) {
    const said = harness.events.filter((event) => event.channel_id === channel.channelId && LOGGED_EVENTS.has(event.type));
    assert.ok(said.length > 0);
    assert.equal(channel.events.length, said.length, `${channel.channelId}: one row per event`);
    channel.events.forEach((row, index) => {
      const event = said[index]!;
      assert.equal(row.kind, event.type);
      const { type: _type, channel_id: _channel, ...fields } = event;
      assert.deepEqual(row.data, fields, `${event.type} stored as emitted`);
      if (event.type === 'emergency_truncation') assert.equal(row.tier, 'emergency');
      else assert.equal(row.tier, event.tier);
    });
    const types = new Set(channel.events.map((row) => row.kind));
    for (const type of ['compaction_triggered', 'compaction_completed', 'emergency_truncation']) assert.ok(types.has(type), `${channel.channelId} has ${type}`);
    // Usage samples: positions never go back, each sample is in another whole percent than the one before.
    assert.ok(channel.samples.length > 20);
    for (let index = 1; index < channel.samples.length; index += 1) {
      assert.ok(channel.samples[index]!.position >= channel.samples[index - 1]!.position);
      assert.notEqual(Math.floor(channel.samples[index]!.usage * 100), Math.floor(channel.samples[index - 1]!.usage * 100));
    }
    // The settings in force, and the hot reload that changed the window.
    assert.deepEqual(channel.settings.map((row) => row.values.context_window), [2000, 2400]);
    assert.equal(channel.settings[0]!.values.background_threshold, 0.8);
    // The tally agrees with the events.
    const tally = tallyLog(channel);
    assert.equal(tally.summaries, said.filter((event) => event.type === 'compaction_completed').length);
    assert.equal(tally.emergencies, said.filter((event) => event.type === 'emergency_truncation').length);
    assert.equal(tally.triggered.background, said.filter((event) => event.type === 'compaction_triggered' && event.tier === 'background').length);
  }
  await harness.close();
});

test('the app writes the compaction log; a restart adds no settings row when nothing changed', async () => {
  const dir = tempDir();
  const config = { ...testConfig({ contextWindow: 1500 }), memory: { ...testConfig().memory, dataDir: dir.path } };
  const events: MagpieEvent[] = [];
  for (const round of [0, 1]) {
    const stream = new EventStream();
    stream.subscribe((event) => events.push(event));
    const app = await openApp({ config: withTestStorage(config), events: stream, env: appEnv() });
    for (let index = round * 80; index < round * 80 + 80; index += 1) await app.runtime.ingest(userMessage('room', index, { words: 25 }));
    await app.runtime.flushCompactions();
    await app.close();
  }
  const db = await openTestDatabase(dir.path);
  const [room] = await readCompactionLog(db);
  assert.ok(room);
  const emitted = events.filter((event) => LOGGED_EVENTS.has(event.type));
  assert.equal(room.events.length, emitted.length);
  assert.ok(room.events.some((row) => row.kind === 'compaction_completed'));
  assert.equal(room.settings.length, 1, 'the same settings after a restart are not recorded twice');
  await db.close();
  dir.remove();
});

test('rows older than compaction_log_days before the newest are pruned', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const clock = new SettableClock(Date.UTC(2026, 0, 1));
  let days = 30;
  const log = new CompactionLog({ db, clock, retentionDays: () => days });
  const event = (at: number) => {
    clock.current = at;
    log.record({ type: 'emergency_truncation', channel_id: 'c', marker_id: 1, messages_dropped: 3, tokens_freed: 10, usage_before: 0.96, usage_after: 0.5 });
  };
  event(Date.UTC(2026, 0, 1));
  event(Date.UTC(2026, 0, 20));
  event(Date.UTC(2026, 1, 5)); // 35 days after the first: pruned as it is written
  assert.equal(await log.prune(), 0);
  assert.deepEqual((await readCompactionLog(db))[0]!.events.map((row) => row.at), [Date.UTC(2026, 0, 20), Date.UTC(2026, 1, 5)]);
  days = 10; // hot reload shortens it
  assert.equal(await log.prune(), 1);
  assert.equal((await readCompactionLog(db))[0]!.events.length, 1);
  // Without a retention (replay), nothing is ever pruned.
  const keepAll = new CompactionLog({ db, clock });
  clock.current += 400 * DAY;
  keepAll.record({ type: 'compaction_failed', channel_id: 'c', tier: 'background', reason: 'timeout' });
  assert.equal(await keepAll.prune(), 0);
  await log.close();
  await keepAll.close();
  await db.close();
  dir.remove();
});

test('compaction_log_max_rows keeps the newest rows; a log opened without bounds prunes nothing', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const clock = new SettableClock(Date.UTC(2024, 0, 1));
  const bounded = new CompactionLog({ db, clock, maxRows: () => 5 });
  for (let index = 0; index < 12; index += 1) {
    clock.current += 1000;
    bounded.record({ type: 'compaction_failed', channel_id: 'c', tier: 'background', reason: `r${index}` });
  }
  assert.equal(await bounded.prune(), 7);
  const reasons = async () => (await readCompactionLog(db))[0]!.events.map((row) => (row.data as { reason: string }).reason);
  assert.deepEqual(await reasons(), ['r7', 'r8', 'r9', 'r10', 'r11']);
  await bounded.close();
  // A command that opens the log years later without bounds leaves the 2024 rows alone.
  clock.current = Date.UTC(2030, 0, 1);
  const unbounded = new CompactionLog({ db, clock });
  await unbounded.close();
  assert.deepEqual(await reasons(), ['r7', 'r8', 'r9', 'r10', 'r11']);
  await db.close();
  dir.remove();
});

test('a log that cannot write reports compaction_log_failed once and never throws into the channel', async () => {
  const dir = tempDir();
  const db = await openTestDatabase(dir.path);
  const stream = new EventStream();
  const seen: MagpieEvent[] = [];
  stream.subscribe((event) => seen.push(event));
  const log = new CompactionLog({ db, clock: new TickingClock(), events: stream });
  await db.exec('DROP TABLE compaction_log');
  for (let attempt = 0; attempt < 3; attempt += 1) {
    assert.doesNotThrow(() => log.record({ type: 'compaction_triggered', channel_id: 'c', tier: 'background', usage: 0.81 }));
  }
  await log.flush();
  assert.equal(seen.filter((event) => event.type === 'compaction_log_failed').length, 1);
  await log.close();
  await db.close();
  dir.remove();
});

test('[metrics] compaction_log_days: bad values are refused with the key named', () => {
  assert.equal(checkConfigText('[metrics]\ncompaction_log_days = 7\n').problems.length, 0);
  for (const [text, needle] of [
    ['[metrics]\ncompaction_log_days = 0\n', 'metrics.compaction_log_days'],
    ['[metrics]\ncompaction_log_days = "thirty"\n', 'metrics.compaction_log_days'],
    ['[metrics]\ncompaction_log_days = 2.5\n', 'metrics.compaction_log_days'],
    ['[metrics]\ncompaction_log_dayz = 3\n', 'compaction_log_days'],
  ] as const) {
    const problems = checkConfigText(text).problems;
    assert.ok(problems.length > 0, text);
    assert.ok(problems.some((problem) => `${problem.path} ${problem.message}`.includes(needle)), JSON.stringify(problems));
  }
});

test('a log write that meets a passing PostgreSQL fault is tried again, not dropped', async (t) => {
  if (TEST_STORAGE === 'postgres') {
    t.skip('run once, from the SQLite run: the fault is PostgreSQL\'s whatever the suite\'s backend');
    return;
  }
  if (!(await requirePostgres(t))) return;
  const proxy = await startDelayedPostgres(TEST_DATABASE_URL, 0);
  const schema = freshSchema(`t${process.env.MAGPIE_TEST_RUN ?? ''}`);
  // Short deadlines: a hung server costs a write well under a second here.
  const db = await PgPoolClient.connect({ url: proxy.url, schema, applicationName: 'compaction-log fault', statementTimeoutMs: 300, queryTimeoutMs: 500, connectTimeoutMs: 500 });
  const stream = new EventStream();
  const seen: MagpieEvent[] = [];
  stream.subscribe((event) => seen.push(event));
  try {
    await applyPgMigrations(db, ALL_MIGRATIONS);
    const log = new CompactionLog({ db, clock: new TickingClock(), events: stream, retryDelaysMs: [200, 400, 800, 1_600, 3_200] });
    proxy.proxy.pause();
    log.record({ type: 'compaction_completed', channel_id: 'c', tier: 'background', usage_before: 0.82, usage_after: 0.5 });
    const written = log.flush();
    // The server answers again after the first attempt (and maybe the second) ran out of time.
    setTimeout(() => proxy.proxy.resume(), 900);
    await written;
    assert.deepEqual(seen.filter((event) => event.type === 'compaction_log_failed'), []);
    assert.deepEqual(await db.prepare('SELECT kind FROM compaction_log').pluck().all(), ['compaction_completed']);
    await log.close();
  } finally {
    proxy.proxy.resume();
    await db.exec(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await db.close();
    await proxy.close();
  }
});
