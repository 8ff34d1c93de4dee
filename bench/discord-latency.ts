/**
 * The Discord path end to end on loopback: the real discord.js client against the fake
 * gateway, the real Anthropic SDK against the fake Messages API (zero delay), the real channel
 * runtime and memory on a temp SQLite file.
 *
 * 1. Latency per answered message (mention → reply posted), median and p99, next to the
 *    loopback floor measured with the same fakes and no Magpie code in between (gateway
 *    delivery to a bare listener + one model call + one REST post). The difference is what
 *    the adapter, runtime, memory archive and agent turn add.
 * 2. Messages per second ingested across 1,000 channels by one process (listen policy, so
 *    every message is recorded, archived and indexed, none answered), through the gateway and
 *    straight into the runtime for comparison.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { EventStream } from '../src/common/events.js';
import type { IncomingMessage } from '../src/channel/types.js';
import { createDiscordClient, DiscordAdapter, type DiscordRuntime } from '../src/discord/index.js';
import { startFakeAnthropic, type FakeAnthropic } from '../test/fakes/fake-anthropic.js';
import { startFakeDiscord, type FakeDiscord, type FakeChannel } from '../test/fakes/fake-discord.js';
import { testConfig } from '../test/discord-helpers.js';
import { median, p99, type BenchReport } from './harness.js';
import { measureSqliteInsertRate } from './sqlite-ingest-floor.js';

const LATENCY_MESSAGES = 200;
const LATENCY_CHANNELS = 10;
const INGEST_CHANNELS = 1_000;
const INGEST_MESSAGES = 20_000;
const USER = '100000000000000001';

function channelId(index: number): string {
  return (700_000_000_000_000_000n + BigInt(index + 1)).toString();
}

interface Rig {
  discord: FakeDiscord;
  model: FakeAnthropic;
  app: MagpieApp;
  adapter: DiscordAdapter;
  ingested: { count: number };
  close(): Promise<void>;
}

async function startRig(options: { channels: number; replyPolicy: 'mention' | 'listen' }): Promise<Rig> {
  const channels: FakeChannel[] = Array.from({ length: options.channels }, (_, index) => ({
    id: channelId(index),
    name: `c${index}`,
    type: 0 as const,
  }));
  const discord = await startFakeDiscord({ users: [{ id: USER, username: 'alice' }], channels, echoBotMessages: false });
  const model = await startFakeAnthropic();
  model.setDefault({ text: 'ok' });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-discord-'));
  const config = testConfig({
    baseUrl: model.baseUrl,
    dataDir,
    discord: { debounceMs: 0, debounceMaxMs: 0, userTurnsPerMinute: 0, registerCommands: false },
    defaults: { replyPolicy: options.replyPolicy },
  });
  const events = new EventStream();
  const app = await openApp({ config, env: {}, events });
  const ingested = { count: 0 };
  const runtime = app.runtime;
  // Counts ingested messages without touching the runtime itself.
  const counting: DiscordRuntime = {
    ingest: async (message: IncomingMessage) => {
      const entry = await runtime.ingest(message);
      ingested.count += 1;
      return entry;
    },
    editMessage: (...args) => runtime.editMessage(...args),
    deleteMessages: (...args) => runtime.deleteMessages(...args),
    status: (id) => runtime.status(id),
    compactNow: (id) => runtime.compactNow(id),
    runSerial: (id, work) => runtime.runSerial(id, work),
    buildModelRequest: (id, request) => runtime.buildModelRequest(id, request),
    appendToTurn: (id, entries, turnId) => runtime.appendToTurn(id, entries, turnId),
    liveContext: (id) => runtime.liveContext(id),
  };
  const client = createDiscordClient({ restApi: discord.restApi, globalRequestsPerSecond: 100_000 });
  const adapter = new DiscordAdapter({ client, runtime: counting, responder: app.responder, memory: app.memory, config: app.config, events });
  await adapter.start('bench-token');
  return {
    discord,
    model,
    app,
    adapter,
    ingested,
    async close() {
      await adapter.stop(1_000);
      await app.close();
      await model.close();
      await discord.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function measureLatency(): Promise<{ endToEnd: number[]; floor: number[] }> {
  const rig = await startRig({ channels: LATENCY_CHANNELS, replyPolicy: 'mention' });
  try {
    const endToEnd: number[] = [];
    for (let index = 0; index < LATENCY_MESSAGES + 20; index += 1) {
      const started = process.hrtime.bigint();
      const id = rig.discord.sendMessage({
        channelId: channelId(index % LATENCY_CHANNELS),
        authorId: USER,
        content: `question number ${index} about the garden rota`,
        mentionsBot: true,
      });
      await rig.discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
      if (index >= 20) endToEnd.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    await rig.adapter.idle();
    return { endToEnd, floor: await measureFloor(rig) };
  } finally {
    await rig.close();
  }
}

/** The same fakes with nothing of Magpie in between: gateway → listener, one model call, one post. */
async function measureFloor(rig: Rig): Promise<number[]> {
  const floor: number[] = [];
  // Its own fake gateway: one session per fake, and the bot's stays connected.
  const discord = await startFakeDiscord({
    users: [{ id: USER, username: 'alice' }],
    channels: [{ id: channelId(0), name: 'c0', type: 0 }],
    echoBotMessages: false,
  });
  const client = createDiscordClient({ restApi: discord.restApi, globalRequestsPerSecond: 100_000 });
  const ready = new Promise<void>((resolve) => client.once('clientReady', () => resolve()));
  await client.login('floor-token');
  await ready;
  const model = rig.app.model!;
  try {
    for (let index = 0; index < LATENCY_MESSAGES + 20; index += 1) {
      const started = process.hrtime.bigint();
      const received = new Promise<void>((resolve) => client.once('messageCreate', () => resolve()));
      discord.sendMessage({ channelId: channelId(0), authorId: USER, content: `floor ${index}` });
      await received;
      await model.createMessage({ system: 'bench', messages: [{ role: 'user', content: 'hi' }], maxTokens: 16 });
      await client.rest.post(`/channels/${channelId(0)}/messages`, { body: { content: 'ok' } });
      if (index >= 20) floor.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
  } finally {
    await client.destroy();
    await discord.close();
  }
  return floor;
}

interface IngestFigures {
  viaGateway: number;
  direct: number;
  commits: number;
  largestGroup: number;
}

async function measureIngest(): Promise<IngestFigures> {
  const rig = await startRig({ channels: INGEST_CHANNELS, replyPolicy: 'listen' });
  try {
    const before = rig.app.runtime.ingestStats();
    const started = process.hrtime.bigint();
    for (let index = 0; index < INGEST_MESSAGES; index += 1) {
      rig.discord.sendMessage({
        channelId: channelId(index % INGEST_CHANNELS),
        authorId: USER,
        content: `message ${index}: the watering rota moves to thursdays from next week`,
      });
      // Let the socket drain now and then so the fake's own buffering is not what we measure.
      if (index % 250 === 249) await new Promise((resolve) => setImmediate(resolve));
    }
    const deadline = Date.now() + 300_000;
    while (rig.ingested.count < INGEST_MESSAGES) {
      if (Date.now() > deadline) throw new Error(`only ${rig.ingested.count} of ${INGEST_MESSAGES} ingested`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const viaGateway = INGEST_MESSAGES / (Number(process.hrtime.bigint() - started) / 1e9);
    const after = rig.app.runtime.ingestStats();

    // Straight into the runtime, as many at once as the gateway delivers (each awaited for
    // durability), so the difference is discord.js and the adapter.
    const directStarted = process.hrtime.bigint();
    const inFlight: Array<Promise<unknown>> = [];
    for (let index = 0; index < INGEST_MESSAGES; index += 1) {
      inFlight.push(
        rig.app.runtime.ingest({
          messageId: `direct-${index}`,
          channelId: channelId(index % INGEST_CHANNELS),
          guildId: '800000000000000001',
          authorId: USER,
          authorName: 'alice',
          role: 'user',
          content: `message ${index}: the watering rota moves to thursdays from next week`,
          createdAt: Date.now(),
        }),
      );
      if (index % 250 === 249) {
        await Promise.all(inFlight);
        inFlight.length = 0;
      }
    }
    await Promise.all(inFlight);
    const direct = INGEST_MESSAGES / (Number(process.hrtime.bigint() - directStarted) / 1e9);
    return { viaGateway, direct, commits: after.commits - before.commits, largestGroup: after.largestGroup };
  } finally {
    await rig.close();
  }
}

export async function run(): Promise<BenchReport> {
  const { endToEnd, floor } = await measureLatency();
  const ingest = await measureIngest();
  const raw = measureSqliteInsertRate({ rows: INGEST_MESSAGES, channels: INGEST_CHANNELS, batch: 500 });
  const added = median(endToEnd) - median(floor);
  return {
    name: 'discord: adapter + runtime on loopback (fake gateway, fake model with zero delay)',
    metrics: [
      { name: 'mention → reply posted, median', value: median(endToEnd), unit: 'ms' },
      { name: 'mention → reply posted, p99', value: p99(endToEnd), unit: 'ms' },
      { name: 'loopback floor (gateway + model call + post, no Magpie), median', value: median(floor), unit: 'ms' },
      { name: 'loopback floor, p99', value: p99(floor), unit: 'ms' },
      { name: 'added by adapter + runtime + memory archive, median', value: added, unit: 'ms' },
      { name: `ingest across ${INGEST_CHANNELS} channels via gateway + adapter`, value: Math.round(ingest.viaGateway), unit: 'messages/s' },
      { name: `ingest across ${INGEST_CHANNELS} channels straight into the runtime`, value: Math.round(ingest.direct), unit: 'messages/s' },
      { name: 'gateway path / direct path', value: ingest.viaGateway / ingest.direct, unit: 'ratio' },
      { name: `raw SQLite + FTS5 batch insert (history + transcript rows, batches of 500, ${INGEST_CHANNELS} channels)`, value: Math.round(raw), unit: 'rows/s' },
      { name: 'gateway path / raw SQLite + FTS5', value: ingest.viaGateway / raw, unit: 'ratio' },
      { name: 'messages per group commit (gateway path, mean)', value: INGEST_MESSAGES / Math.max(1, ingest.commits), unit: 'messages' },
    ],
    notes: [
      "discord.js's own 50 requests/s global REST cap is lifted here: it paces real Discord traffic and would dominate p99",
      `${LATENCY_MESSAGES} answered messages over ${LATENCY_CHANNELS} channels, one at a time, debounce 0; ${INGEST_MESSAGES} messages for ingest`,
      'a message counts once its ingest resolved: history row and full-text transcript row committed (group commit); its vector follows in the background and search scans it exactly meanwhile',
    ],
  };
}
