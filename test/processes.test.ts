/**
 * Two processes on one PostgreSQL schema (two apps here, each with its own connections, writer
 * key and change feed): what one changes in a channel the other serves is gone from, or present
 * in, the other's next model request. On SQLite one process owns the data dir: skipped there.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openApp, type MagpieApp } from '../src/app/index.js';
import type { ReplyTarget } from '../src/app/channel-responder.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import { requestErasure } from '../src/privacy/erasure-requests.js';
import { openStorageBesideWriter } from '../src/storage/open-storage.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { isAgentRequest, testConfig } from './discord-helpers.js';
import { requirePostgres } from './support/postgres-available.js';
import { appEnv, TEST_DATABASE_URL, TEST_STORAGE } from './support/storage.js';

const CHANNEL = 'shared-channel';
const RUN = Math.random().toString(36).slice(2, 8);

interface Process {
  app: MagpieApp;
  events: MagpieEvent[];
  command: string;
  dir: string;
}

let model: FakeAnthropic;
let a: Process;
let b: Process;
let skipped: string | undefined;
let sequence = 0;

async function openProcess(name: string, dir: string, schemaDir: string): Promise<Process> {
  const events: MagpieEvent[] = [];
  const stream = new EventStream();
  stream.subscribe((event) => events.push(event));
  const shared = testConfig({ baseUrl: model.baseUrl, dataDir: schemaDir });
  const config = { ...testConfig({ baseUrl: model.baseUrl, dataDir: dir }), storage: shared.storage };
  const command = `magpie ${name}-${RUN}`;
  const app = await openApp({ config, env: appEnv(), events: stream, command, writerKey: `${name}-${RUN}` });
  return { app, events, command, dir };
}

before(async () => {
  if (TEST_STORAGE !== 'postgres') {
    skipped = 'processes share a store on PostgreSQL only (MAGPIE_TEST_STORAGE=postgres)';
    return;
  }
  model = await startFakeAnthropic();
  model.setDefault((request) => (isAgentRequest(request.body) ? { text: 'Noted.' } : { status: 500 }));
  const dirA = mkdtempSync(path.join(os.tmpdir(), 'magpie-proc-a-'));
  const dirB = mkdtempSync(path.join(os.tmpdir(), 'magpie-proc-b-'));
  a = await openProcess('a', dirA, dirA);
  b = await openProcess('b', dirB, dirA);
});

after(async () => {
  if (skipped) return;
  await b?.app.close();
  await a?.app.close();
  for (const process of [a, b]) if (process) rmSync(process.dir, { recursive: true, force: true });
  await model?.close();
});

async function ready(t: { skip(message?: string): void }): Promise<boolean> {
  if (skipped) {
    t.skip(skipped);
    return false;
  }
  return requirePostgres(t);
}

function say(process: Process, content: string, authorId = 'u-ana'): Promise<unknown> {
  sequence += 1;
  return process.app.runtime.ingest({
    messageId: `m-${RUN}-${sequence}`,
    channelId: CHANNEL,
    guildId: 'g1',
    authorId,
    authorName: authorId.slice(2),
    role: 'user',
    content,
    createdAt: Date.UTC(2026, 0, 1) + sequence * 60_000,
  });
}

const target: ReplyTarget = {
  async send() {
    sequence += 1;
    return `reply-${RUN}-${sequence}`;
  },
};

/** What process B sends the model when asked now (the fake Messages API records it). */
async function nextRequest(): Promise<{ text: string; system: string }> {
  await say(b, 'anything new?');
  const before = model.requests.length;
  const outcome = await b.app.responder.respond({ channelId: CHANNEL, userId: 'u-ana', context: { channelId: CHANNEL, guildId: 'g1', sourceMessageIds: [] }, target });
  assert.equal(outcome, 'replied');
  const request = model.requests.slice(before).find((recorded) => isAgentRequest(recorded.body));
  assert.ok(request, 'B asked the model');
  return { text: JSON.stringify(request.body.messages), system: JSON.stringify(request.body.system) };
}

/** Waits (no deadline of its own beyond the test's) until B has logged a matching event after `from`. */
async function heard(from: number, match: (event: MagpieEvent) => boolean, what: string, listener: Process = b): Promise<void> {
  for (let attempt = 0; attempt < 1_000; attempt += 1) {
    if (listener.events.slice(from).some(match)) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.fail(`${listener === b ? 'B' : 'A'} never logged ${what}`);
}

/** Loads (or rebuilds) the channel's vector index in that process (the SQL memory store's own call). */
async function warm(process: Process, channelId: string): Promise<void> {
  const store = process.app.memory as unknown as { warmIndexes(channelIds: readonly string[]): Promise<void> };
  await store.warmIndexes([channelId]);
}

const rereadOf = (event: MagpieEvent) => event.type === 'channel_reread' && event.channel_id === CHANNEL;

test('a message deleted through process A is gone from process B\'s next model request', async (t) => {
  if (!(await ready(t))) return;
  const secret = (await say(b, 'the vault code is PINEAPPLE-4471, do not share')) as { messageId: string };
  assert.ok((await nextRequest()).text.includes('PINEAPPLE-4471'), 'precondition: B sends it');
  const from = b.events.length;
  assert.equal(await a.app.runtime.deleteMessages(CHANNEL, [secret.messageId]), 1);
  await heard(from, rereadOf, 'a re-read of the channel');
  assert.ok(!(await nextRequest()).text.includes('PINEAPPLE'), 'B no longer sends it');
});

test('a message edited through process A reaches process B\'s next model request in its new words', async (t) => {
  if (!(await ready(t))) return;
  const said = (await say(b, 'meet me at the OLD-QUAY gate at noon')) as { messageId: string };
  assert.ok((await nextRequest()).text.includes('OLD-QUAY'), 'precondition');
  const from = b.events.length;
  assert.equal(await a.app.runtime.editMessage(CHANNEL, said.messageId, 'meet me at the NEW-PIER gate at noon'), true);
  await heard(from, rereadOf, 'a re-read after the edit');
  const text = (await nextRequest()).text;
  assert.ok(text.includes('NEW-PIER') && !text.includes('OLD-QUAY'), 'B sends the edited text only');
});

test('a compaction that lands in process B reaches process A, which has the channel loaded', async (t) => {
  if (!(await ready(t))) return;
  model.setDefault((request) => (isAgentRequest(request.body) ? { text: 'Noted.' } : { text: `Summary ${RUN}: they talked about gates and vaults.` }));
  try {
    await a.app.runtime.liveContext(CHANNEL);
    const from = a.events.length;
    await b.app.runtime.compactNow(CHANNEL);
    assert.ok((await b.app.runtime.liveContext(CHANNEL)).summaries.some((summary) => summary.content.includes(`Summary ${RUN}`)), 'landed in B');
    await heard(from, (event) => rereadOf(event) && event.changed === true, 'a re-read after the landing', a);
    const live = await a.app.runtime.liveContext(CHANNEL);
    const inB = await b.app.runtime.liveContext(CHANNEL);
    assert.ok(live.summaries.some((summary) => summary.content.includes(`Summary ${RUN}`)), 'A holds the summary');
    assert.deepEqual(
      live.entries.map((entry) => entry.seq),
      inB.entries.map((entry) => entry.seq),
      'A holds the same live entries as B',
    );
  } finally {
    model.setDefault((request) => (isAgentRequest(request.body) ? { text: 'Noted.' } : { status: 500 }));
  }
});

test('a persona set through process A is in process B\'s next model request', async (t) => {
  if (!(await ready(t))) return;
  const from = b.events.length;
  await a.app.runtime.personas.set(CHANNEL, 'You are Captain Parrot, who speaks in rhymes.', 'u-ana');
  await heard(from, (event) => event.type === 'persona_reread' && event.channel_id === CHANNEL, 'a persona re-read');
  assert.ok((await nextRequest()).system.includes('Captain Parrot'));
  await a.app.runtime.personas.clear(CHANNEL);
});

test('forget-me through process A (and an erasure request from the CLI) reaches process B', async (t) => {
  if (!(await ready(t))) return;
  await say(b, 'Zed here, my phone is 555-0199-ZEBRA', 'u-zed');
  await say(b, 'Quinn here, my locker is QUOKKA-88', 'u-quinn');
  assert.match((await nextRequest()).text, /555-0199-ZEBRA[\s\S]*QUOKKA-88/, 'precondition: B sends both');
  let from = b.events.length;
  const erasure = await a.app.runtime.forgetUser('u-zed', 'test');
  assert.ok(erasure.messages >= 1);
  await heard(from, rereadOf, 'a re-read after forget-me');
  assert.ok(!(await nextRequest()).text.includes('ZEBRA'), 'forget-me through A');

  // `magpie memory forget --user` beside both: one of them claims the request (woken, not polled), both drop the text.
  from = b.events.length;
  const cli = await openStorageBesideWriter(a.app.target, 'magpie memory forget');
  try {
    const request = await requestErasure(cli.db, 'user', 'u-quinn', { timeoutMs: 10_000 });
    assert.equal(request?.status, 'done', request?.result ?? '');
  } finally {
    await cli.close();
  }
  const applied = [...a.events, ...b.events].filter((event) => event.type === 'erasure_request_applied');
  assert.equal(applied.length, 1, 'applied once, by the process that claimed it');
  if (!b.events.slice(from).some((event) => event.type === 'erasure_request_applied')) await heard(from, rereadOf, 'a re-read after the erasure');
  assert.ok(!(await nextRequest()).text.includes('QUOKKA'), 'the erasure request reached B');
});

test('after B\'s listening connection is terminated, a change it did not hear is seen (re-read on resubscribe)', async (t) => {
  if (!(await ready(t))) return;
  const gone = (await say(b, 'the alarm phrase is MARMALADE-SKY')) as { messageId: string };
  assert.ok((await nextRequest()).text.includes('MARMALADE-SKY'), 'precondition');
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    const from = b.events.length;
    // Deleted with no notification at all, then B's listener is cut: only B's re-read once it
    // listens again can find the change (whatever the timing of the reconnect).
    const schema = (a.app.target as { schema: string }).schema;
    await admin.query(`DELETE FROM "${schema}".history_entries WHERE channel_id = $1 AND message_id = $2`, [CHANNEL, gone.messageId]);
    const killed = await admin.query(`SELECT pg_terminate_backend(pid, 2000) AS done FROM pg_stat_activity WHERE application_name = $1`, [`${b.command} changes`]);
    assert.equal(killed.rowCount, 1, 'B\'s listener was found and terminated');
    await heard(from, (event) => rereadOf(event) && event.cause === 'resubscribed' && event.changed === true, 'a re-read on resubscribe');
  } finally {
    await admin.end();
  }
  assert.ok(!(await nextRequest()).text.includes('MARMALADE'), 'B no longer sends it');
});

test('the same memory saved by two processes at once is stored once', async (t) => {
  if (!(await ready(t))) return;
  const content = `Ana keeps her bike in shed ${RUN}`;
  const child = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'memory-save-child.js');
  const savers = [1, 2].map((n) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), `magpie-saver-${n}-`));
    const spawned = spawn(process.execPath, [child, JSON.stringify(a.app.target), dir, `saver-${n}-${RUN}`, content], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    spawned.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    const exited = new Promise<number | null>((resolve) => spawned.on('exit', resolve));
    return { dir, spawned, output: () => out, exited };
  });
  try {
    for (const saver of savers) {
      for (let attempt = 0; attempt < 2_000 && !saver.output().includes('ready'); attempt += 1) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(saver.output().includes('ready'), 'the saver opened the store');
    }
    for (const saver of savers) saver.spawned.stdin.write('go\n');
    assert.deepEqual(await Promise.all(savers.map((saver) => saver.exited)), [0, 0]);
    const ids = savers.map((saver) => saver.output().split('\n')[1]);
    assert.equal(ids[0], ids[1], 'both name the one memory');
  } finally {
    for (const saver of savers) {
      saver.spawned.kill();
      rmSync(saver.dir, { recursive: true, force: true });
    }
  }
  const rows = (await a.app.db.prepare(`SELECT COUNT(*) AS n FROM memory_items WHERE kind = 'memory' AND content = ?`).get(content)) as { n: number | string };
  assert.equal(Number(rows.n), 1);
});

test('a deletion leaves a tombstone for each process\'s index files; one process\'s save clears only its own', async (t) => {
  if (!(await ready(t))) return;
  const channelId = `idx-${RUN}`;
  const location = { channelId, guildId: 'g1' };
  const kept = await a.app.memory.save({ location, content: 'The team meets on Thursdays at the harbour office', memoryType: 'fact' });
  const doomed = await a.app.memory.save({ location, content: 'Bo owes Ana forty euros for the concert tickets', memoryType: 'fact' });
  assert.notEqual(kept.id, doomed.id);
  const owner = (process: Process) => readFileSync(path.join(process.dir, 'index', 'owner'), 'utf8').trim();
  for (const process of [a, b]) {
    await warm(process, channelId);
    await process.app.memory.releaseChannel?.(channelId);
  }
  const states = (await a.app.db.prepare(`SELECT index_key FROM memory_index_state WHERE index_key LIKE ?`).all(`%|%${channelId}`)) as { index_key: string }[];
  assert.deepEqual(states.map((row) => row.index_key.split('|')[0]).sort(), [owner(a), owner(b)].sort(), 'one state row per process');

  assert.ok(await a.app.memory.forget(doomed.id));
  const tombstones = async () =>
    ((await a.app.db.prepare(`SELECT index_key FROM memory_index_tombstones WHERE index_key LIKE ?`).all(`%|%${channelId}`)) as { index_key: string }[]).map(
      (row) => row.index_key.split('|')[0],
    );
  assert.deepEqual(await tombstones(), [owner(b)], 'A saved its file without the point; B\'s file still needs its tombstone');
  await warm(b, channelId);
  await b.app.memory.releaseChannel?.(channelId);
  assert.deepEqual(await tombstones(), [], 'B applied it and saved');
});
