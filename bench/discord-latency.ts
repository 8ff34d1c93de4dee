/**
 * The Discord path end to end on loopback: the real discord.js client against the fake
 * gateway, the real Anthropic SDK against the fake Messages API (zero delay), the real channel
 * runtime and memory on a temp SQLite file.
 *
 * Latency per answered message (mention → reply posted), median and p99, next to the loopback
 * floor measured with the same fakes and no Magpie code in between (gateway delivery to a bare
 * listener + one model call + one REST post). The difference is what the adapter, runtime,
 * memory archive and agent turn add. Ingest throughput is `discord-ingest.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { EventStream } from '../src/common/events.js';
import { createDiscordClient, DiscordAdapter } from '../src/discord/index.js';
import { startFakeAnthropic, type FakeAnthropic } from '../test/fakes/fake-anthropic.js';
import { startFakeDiscord, type FakeDiscord, type FakeChannel } from '../test/fakes/fake-discord.js';
import { testConfig } from '../test/discord-helpers.js';
import { median, p99, type BenchReport } from './harness.js';

const LATENCY_MESSAGES = 200;
const LATENCY_CHANNELS = 10;
const USER = '100000000000000001';

function channelId(index: number): string {
  return (700_000_000_000_000_000n + BigInt(index + 1)).toString();
}

interface Rig {
  discord: FakeDiscord;
  model: FakeAnthropic;
  app: MagpieApp;
  adapter: DiscordAdapter;
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
  const client = createDiscordClient({ restApi: discord.restApi, globalRequestsPerSecond: 100_000 });
  const adapter = new DiscordAdapter({ client, runtime: app.runtime, responder: app.responder, memory: app.memory, config: app.config, events });
  await adapter.start('bench-token');
  return {
    discord,
    model,
    app,
    adapter,
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

export async function run(): Promise<BenchReport> {
  const { endToEnd, floor } = await measureLatency();
  const added = median(endToEnd) - median(floor);
  return {
    name: 'discord: adapter + runtime on loopback (fake gateway, fake model with zero delay)',
    metrics: [
      { name: 'mention → reply posted, median', value: median(endToEnd), unit: 'ms' },
      { name: 'mention → reply posted, p99', value: p99(endToEnd), unit: 'ms' },
      { name: 'loopback floor (gateway + model call + post, no Magpie), median', value: median(floor), unit: 'ms' },
      { name: 'loopback floor, p99', value: p99(floor), unit: 'ms' },
      { name: 'added by adapter + runtime + memory archive, median', value: added, unit: 'ms' },
    ],
    notes: [
      "discord.js's own 50 requests/s global REST cap is lifted here: it paces real Discord traffic and would dominate p99",
      `${LATENCY_MESSAGES} answered messages over ${LATENCY_CHANNELS} channels, one at a time, debounce 0; ingest throughput is the ingest benchmark`,
    ],
  };
}
