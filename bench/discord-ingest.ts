/**
 * Messages per second ingested across 1,000 channels by one process (listen policy, so every
 * message is recorded, archived and indexed, none answered): the real discord.js client against
 * the fake gateway (in a thread of its own, as Discord is on other machines), the real adapter,
 * runtime and memory, then the same messages straight into the runtime for comparison. Printed
 * beside the raw SQLite + FTS5 batch-insert rate measured in the same run, and the same figures
 * on PostgreSQL when it answers.
 */
import { DEFAULTS } from '../src/config/defaults.js';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openApp, type MagpieApp } from '../src/app/index.js';
import { EventStream } from '../src/common/events.js';
import type { IncomingMessage } from '../src/context/types.js';
import type { StorageSettings } from '../src/config/types.js';
import { createDiscordClient, DiscordAdapter, type DiscordRuntime } from '../src/discord/index.js';
import { testConfig } from '../test/discord-helpers.js';
import { snowflakeAt } from '../test/fakes/discord/state.js';
import { startGatewayThread, type GatewayThread } from './gateway-thread.js';
import { mainThreadCpuMs } from './thread-cpu.js';
import { collectGarbage, median, type BenchMetric, type BenchReport } from './harness.js';
import { measureSqliteInsertRate } from './sqlite-ingest-floor.js';
import { measurePostgresInsertRate, postgresForBench, type BenchPostgres } from './postgres-bench.js';
import { startProxyThread } from './proxy-thread.js';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { availableParallelism } from 'node:os';
import { wantsWriterThread } from '../src/storage/writer-thread.js';

const DEFAULT_STORAGE = DEFAULTS.storage;

const CHANNELS = 1_000;
const MESSAGES = 20_000;
const ROUNDS = 3;
const USER = '100000000000000001';
const TEXT = 'message {n}: the watering rota moves to thursdays from next week';

function channelId(index: number): string {
  return (700_000_000_000_000_000n + BigInt(index + 1)).toString();
}

export interface IngestFigures {
  /** Messages/s through the gateway, counted when each ingest resolved (row and full text committed). */
  viaGateway: number;
  /** The same count, until every message's vector was written too. */
  withVectors: number;
  /** Messages/s straight into the runtime. */
  direct: number;
  /** Messages per group commit on the gateway path. */
  perCommit: number;
  /** Share of those group commits that SQLite's writer thread ran (0 on PostgreSQL). */
  offThreadShare: number;
  /** CPU of every thread of the process (the fake gateway's included) per message on the gateway path, in µs. */
  processCpuUs: number;
  /** Main-thread CPU per message on the gateway path, in µs (Linux only). */
  mainCpuUs: number | undefined;
  /** The same until every vector is written too. */
  mainCpuWithVectorsUs: number | undefined;
  /** Event-loop stalls during the gateway phase (until every vector is written), p99 and max, in ms. */
  loopP99Ms: number;
  loopMaxMs: number;
  /** Statements answered per message over the same phase (each Sync or simple query), when a proxy counts them. */
  statementsPerMessage: number | undefined;
  /** Round trips waited for per message over the same phase (pipelined statements share one). */
  roundTripsPerMessage: number | undefined;
}

interface Rig {
  gateway: GatewayThread;
  app: MagpieApp;
  adapter: DiscordAdapter;
  ingested: { count: number };
  close(): Promise<void>;
}

async function startRig(storage: StorageSettings, env: NodeJS.ProcessEnv): Promise<Rig> {
  const gateway = await startGatewayThread({
    users: [{ id: USER, username: 'alice' }],
    channels: Array.from({ length: CHANNELS }, (_, index) => ({ id: channelId(index), name: `c${index}`, type: 0 as const })),
  });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-ingest-'));
  const config = {
    ...testConfig({
      // No model is called: every channel listens.
      baseUrl: 'http://127.0.0.1:9',
      dataDir,
      discord: { debounceMs: 0, debounceMaxMs: 0, userTurnsPerMinute: 0, registerCommands: false },
      defaults: { replyPolicy: 'listen' },
    }),
    storage,
  };
  const events = new EventStream();
  const app = await openApp({ config, env, events });
  const ingested = { count: 0 };
  const runtime = app.runtime;
  // Counts ingested messages without touching the runtime itself.
  const counting: DiscordRuntime = {
    // One promise on top of the runtime's, as little as counting can cost the path it measures.
    ingest: (message: IncomingMessage) =>
      runtime.ingest(message).then((entry) => {
        ingested.count += 1;
        return entry;
      }),
    editMessage: (...args) => runtime.editMessage(...args),
    deleteMessages: (...args) => runtime.deleteMessages(...args),
    status: (id) => runtime.status(id),
    compactNow: (id) => runtime.compactNow(id),
    runSerial: (id, work) => runtime.runSerial(id, work),
    awaitAnswer: (id, turnId) => runtime.awaitAnswer(id, turnId),
    buildModelRequest: (id, request) => runtime.buildModelRequest(id, request),
    appendToTurn: (id, entries, turnId) => runtime.appendToTurn(id, entries, turnId),
    liveContext: (id) => runtime.liveContext(id),
  };
  const client = createDiscordClient({ restApi: gateway.restApi, globalRequestsPerSecond: 100_000 });
  const adapter = new DiscordAdapter({ client, runtime: counting, responder: app.responder, memory: app.memory, config: app.config, events });
  await adapter.start('bench-token');
  return {
    gateway,
    app,
    adapter,
    ingested,
    async close() {
      await adapter.stop(1_000);
      await app.close();
      await gateway.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** One round: a fresh process state (data dir or schema), gateway path then direct path. */
export async function measureIngest(
  storage: StorageSettings,
  env: NodeJS.ProcessEnv = {},
  messages = MESSAGES,
  counts?: () => Promise<{ statements: number; exchanges: number }>,
  archived = 0,
): Promise<IngestFigures> {
  const rig = await startRig(storage, env);
  try {
    const memory = rig.app.memory as { whenIndexed?: () => Promise<void> };
    if (!memory.whenIndexed) throw new Error('this memory store cannot tell when its vectors are written');
    // A store in use: messages archived before the clock starts, vectors and all.
    await ingestDirect(rig.app, Date.now() - 3_600_000, archived);
    await memory.whenIndexed();
    // Each round starts from a collected heap, not from the garbage of the rounds before it.
    collectGarbage();
    const before = rig.app.runtime.ingestStats();
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    const tripsBefore = await counts?.();
    const processBefore = process.cpuUsage();
    const cpuBefore = mainThreadCpuMs();
    const started = process.hrtime.bigint();
    const sent = rig.gateway.sendBurst({ count: messages, authorId: USER, content: TEXT });
    const deadline = Date.now() + 600_000;
    while (rig.ingested.count < messages) {
      if (Date.now() > deadline) throw new Error(`only ${rig.ingested.count} of ${messages} ingested`);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const cpuAfter = mainThreadCpuMs();
    const processUsed = process.cpuUsage(processBefore);
    await sent;
    await memory.whenIndexed();
    const vectorSeconds = Number(process.hrtime.bigint() - started) / 1e9;
    const cpuVectors = mainThreadCpuMs();
    loop.disable();
    const tripsAfter = await counts?.();
    const after = rig.app.runtime.ingestStats();

    // Straight into the runtime, as many at once as the gateway delivers (each awaited for
    // durability), so the difference is discord.js and the adapter.
    const directStarted = process.hrtime.bigint();
    // A millisecond past every id the gateway made: none of these can be taken for one of those.
    await ingestDirect(rig.app, Date.now() + 1, messages);
    const direct = messages / (Number(process.hrtime.bigint() - directStarted) / 1e9);
    return {
      viaGateway: messages / seconds,
      withVectors: messages / vectorSeconds,
      direct,
      perCommit: messages / Math.max(1, after.commits - before.commits),
      offThreadShare: (after.whole - before.whole) / Math.max(1, after.commits - before.commits),
      processCpuUs: (processUsed.user + processUsed.system) / messages,
      mainCpuUs: cpuBefore === undefined || cpuAfter === undefined ? undefined : ((cpuAfter - cpuBefore) * 1000) / messages,
      mainCpuWithVectorsUs: cpuBefore === undefined || cpuVectors === undefined ? undefined : ((cpuVectors - cpuBefore) * 1000) / messages,
      loopP99Ms: loop.percentile(99) / 1e6,
      loopMaxMs: loop.max / 1e6,
      statementsPerMessage: tripsBefore === undefined || tripsAfter === undefined ? undefined : (tripsAfter.statements - tripsBefore.statements) / messages,
      roundTripsPerMessage: tripsBefore === undefined || tripsAfter === undefined ? undefined : (tripsAfter.exchanges - tripsBefore.exchanges) / messages,
    };
  } finally {
    await rig.close();
  }
}

/** `count` messages straight into the runtime, 250 in flight at a time, with ids as Discord would have made them at `atMs`. */
async function ingestDirect(app: MagpieApp, atMs: number, count: number): Promise<void> {
  const inFlight: Array<Promise<unknown>> = [];
  for (let index = 0; index < count; index += 1) {
    inFlight.push(
      app.runtime.ingest({
        messageId: snowflakeAt(atMs, index),
        channelId: channelId(index % CHANNELS),
        guildId: '800000000000000001',
        authorId: USER,
        authorName: 'alice',
        role: 'user',
        content: TEXT.replace('{n}', String(index)),
        createdAt: Date.now(),
      }),
    );
    if (index % 250 === 249) {
      await Promise.all(inFlight);
      inFlight.length = 0;
    }
  }
  await Promise.all(inFlight);
}

const PROXY_DELAYS_MS = [0, 1, 5];
const PROXY_MESSAGES = MESSAGES;
const PROXY_ROUNDS = 3;

function rawRate(raw: number[]): number {
  return median(raw);
}

/** One burst through the delaying proxy on a fresh schema. */
async function oneDelayedRound(postgres: BenchPostgres, delayMs: number): Promise<IngestFigures> {
  return postgres.withSchema(async (storage, env) => {
    const delayed = await startProxyThread(env[storage.urlEnv]!, delayMs);
    try {
      return await measureIngest(storage, { ...env, [storage.urlEnv]: delayed.url }, PROXY_MESSAGES, () => delayed.counts());
    } finally {
      await delayed.close();
    }
  });
}

/**
 * Ingest on PostgreSQL through the delaying proxy: rate, round trips per message, loop stalls,
 * each the median of PROXY_ROUNDS bursts (one burst's rate swings by half between runs).
 */
async function throughDelay(postgres: BenchPostgres, loopbackRaw: number): Promise<BenchMetric[]> {
  const metrics: BenchMetric[] = [];
  for (const delayMs of PROXY_DELAYS_MS) {
    const rounds: IngestFigures[] = [];
    for (let round = 0; round < PROXY_ROUNDS; round += 1) rounds.push(await oneDelayedRound(postgres, delayMs));
    const of = (pick: (round: IngestFigures) => number): number => median(rounds.map(pick));
    const rate = of((round) => round.viaGateway);
    const label = `PostgreSQL +${delayMs} ms each way`;
    const range = (pick: (round: IngestFigures) => number): string => spread(rounds.map(pick));
    metrics.push(
      {
        name: `${label}: ingest via gateway + adapter, median of ${PROXY_ROUNDS} (range ${range((round) => round.viaGateway)})`,
        value: Math.round(rate),
        unit: 'messages/s',
        ...(delayMs === 5 ? { target: '≥ 2,000' } : {}),
      },
      { name: `${label}: round trips waited for per message (vectors included)`, value: Math.round(of((round) => round.roundTripsPerMessage ?? NaN) * 100) / 100, unit: '', target: '≤ 2' },
      { name: `${label}: statements per message (pipelined ones counted each)`, value: Math.round(of((round) => round.statementsPerMessage ?? NaN) * 100) / 100, unit: '' },
      {
        name: `${label}: event-loop stall p99, median (range ${rounds.map((round) => round.loopP99Ms.toFixed(1)).join(', ')})`,
        value: Math.round(of((round) => round.loopP99Ms) * 10) / 10,
        unit: 'ms',
        ...(delayMs === 5 ? { target: '≤ 20' } : {}),
      },
      { name: `${label}: event-loop stall max, median (range ${range((round) => round.loopMaxMs)})`, value: Math.round(of((round) => round.loopMaxMs)), unit: 'ms' },
    );
    if (delayMs === 0) metrics.push({ name: `${label}: gateway path / raw insert (loopback)`, value: rate / loopbackRaw, unit: 'ratio', target: '≥ 0.5' });
  }
  return metrics;
}

function spread(values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  return `${Math.round(sorted[0]!)}–${Math.round(sorted[sorted.length - 1]!)}`;
}

/** Main-thread CPU per message: what the event loop spends, whatever the neighbours' load. */
function cpuMetric(label: string, rounds: IngestFigures[]): BenchMetric[] {
  const values = rounds.map((round) => round.mainCpuUs).filter((value): value is number => value !== undefined);
  const withVectors = rounds.map((round) => round.mainCpuWithVectorsUs).filter((value): value is number => value !== undefined);
  if (values.length === 0 || withVectors.length === 0) return [];
  return [
    {
      name: `${label}: main-thread CPU per message, gateway path, median (range ${spread(values)}); 1e6 / this = the rate with a core to itself`,
      value: Math.round(median(values)),
      unit: 'µs',
    },
    { name: `${label}: the same, until every vector is written too`, value: Math.round(median(withVectors)), unit: 'µs' },
  ];
}

/** Rounds of SQLite with the writer thread set the other way from `auto`'s choice here. */
const OTHER_WAY_ROUNDS = 2;

/** The SQLite gateway phase with the writer thread the other way from the default's rounds. */
function writerThreadMetrics(threadByDefault: boolean, rounds: IngestFigures[]): BenchMetric[] {
  const label = `SQLite, writer thread ${threadByDefault ? 'off' : 'on'} (auto turns it ${threadByDefault ? 'on' : 'off'} with ${availableParallelism()} cores), median of ${rounds.length}`;
  const of = (pick: (round: IngestFigures) => number): number => median(rounds.map(pick));
  return [
    { name: `${label}: ingest via gateway + adapter (range ${spread(rounds.map((round) => round.viaGateway))})`, value: Math.round(of((round) => round.viaGateway)), unit: 'messages/s' },
    { name: `${label}: main-thread CPU per message`, value: Math.round(of((round) => round.mainCpuUs ?? Number.NaN)), unit: 'µs' },
    { name: `${label}: CPU of the whole process per message`, value: Math.round(of((round) => round.processCpuUs)), unit: 'µs' },
    { name: `${label}: event-loop stall p99`, value: of((round) => round.loopP99Ms), unit: 'ms' },
  ];
}

/** Event-loop stalls on the gateway path (SQLite runs its statements on the event loop). */
function loopMetrics(label: string, rounds: IngestFigures[]): BenchMetric[] {
  return [
    { name: `${label}: event-loop stall p99 during the burst, median (range ${spread(rounds.map((round) => round.loopP99Ms))})`, value: Math.round(median(rounds.map((round) => round.loopP99Ms))), unit: 'ms' },
    { name: `${label}: event-loop stall max, median (range ${spread(rounds.map((round) => round.loopMaxMs))})`, value: Math.round(median(rounds.map((round) => round.loopMaxMs))), unit: 'ms' },
  ];
}

/** Messages already archived in the "store in use" round. */
const IN_USE_ARCHIVED = 50_000;

/**
 * The same burst into a store that already holds IN_USE_ARCHIVED messages over the same channels
 * (one round), beside the floor at that size: on SQLite each commit then dirties a page per
 * channel in every channel-keyed B-tree, so both fall as the archive grows.
 */
function inUse(label: string, round: IngestFigures, floor: number): BenchMetric[] {
  const name = `${label}, ${IN_USE_ARCHIVED.toLocaleString('en-US')} messages already archived`;
  return [
    { name: `${name}: ingest via gateway + adapter (one round)`, value: Math.round(round.viaGateway), unit: 'messages/s' },
    { name: `${name}: raw batch insert at the same size`, value: Math.round(floor), unit: 'rows/s' },
    { name: `${name}: gateway path / raw insert`, value: round.viaGateway / floor, unit: 'ratio' },
    { name: `${name}: main-thread CPU per message`, value: Math.round(round.mainCpuUs ?? NaN), unit: 'µs' },
    { name: `${name}: event-loop stall p99`, value: Math.round(round.loopP99Ms), unit: 'ms' },
    { name: `${name}: event-loop stall max`, value: Math.round(round.loopMaxMs), unit: 'ms' },
  ];
}

async function sqliteInUse(): Promise<BenchMetric[]> {
  const round = await measureIngest({ ...DEFAULT_STORAGE, backend: 'sqlite' }, {}, MESSAGES, undefined, IN_USE_ARCHIVED);
  return inUse('SQLite', round, await measureSqliteInsertRate({ rows: MESSAGES, channels: CHANNELS, batch: 500, archived: IN_USE_ARCHIVED }));
}

async function postgresInUse(postgres: BenchPostgres): Promise<BenchMetric[]> {
  const round = await postgres.withSchema((storage, env) => measureIngest(storage, env, MESSAGES, undefined, IN_USE_ARCHIVED));
  const floor = await postgres.withSchema((storage, env) =>
    measurePostgresInsertRate({ storage, env, rows: MESSAGES, channels: CHANNELS, batch: 500, archived: IN_USE_ARCHIVED }),
  );
  return inUse('PostgreSQL', round, floor);
}

function backendMetrics(label: string, rounds: IngestFigures[], raw: number[]): BenchMetric[] {
  const gateway = median(rounds.map((round) => round.viaGateway));
  const rawRate = median(raw);
  return [
    {
      name: `${label}: ingest across ${CHANNELS} channels via gateway + adapter, median of ${rounds.length} (range ${spread(rounds.map((round) => round.viaGateway))})`,
      value: Math.round(gateway),
      unit: 'messages/s',
      ...(label === 'SQLite' ? { target: '≥ 10,000' } : {}),
    },
    {
      name: `${label}: the same, counted until every vector is written too`,
      value: Math.round(median(rounds.map((round) => round.withVectors))),
      unit: 'messages/s',
    },
    {
      name: `${label}: ingest straight into the runtime, median (range ${spread(rounds.map((round) => round.direct))})`,
      value: Math.round(median(rounds.map((round) => round.direct))),
      unit: 'messages/s',
    },
    {
      name: `${label}: raw batch insert (history + transcript rows with full text, batches of 500), median (range ${spread(raw)})`,
      value: Math.round(rawRate),
      unit: 'rows/s',
    },
    { name: `${label}: gateway path / raw insert`, value: gateway / rawRate, unit: 'ratio', ...(label === 'SQLite' ? { target: '≥ 0.7' } : { target: '≥ 0.5' }) },
    { name: `${label}: messages per group commit (gateway path)`, value: median(rounds.map((round) => round.perCommit)), unit: 'messages' },
    ...(label === 'SQLite'
      ? [{ name: `${label}: share of those group commits run on the writer thread`, value: median(rounds.map((round) => round.offThreadShare)), unit: 'ratio' }]
      : []),
    ...cpuMetric(label, rounds),
    {
      name: `${label}: CPU of the whole process per message, gateway path (every thread, the fake gateway's too), median; 2e6 / this = the rate two cores could reach`,
      value: Math.round(median(rounds.map((round) => round.processCpuUs))),
      unit: 'µs',
    },
  ];
}

export async function run(): Promise<BenchReport> {
  const sqlite: IngestFigures[] = [];
  const sqliteRaw: number[] = [];
  // The writer thread as `auto` does not set it on this machine, for the figures beside the default's.
  const threadByDefault = wantsWriterThread(DEFAULT_STORAGE.writerThread);
  const otherWay: IngestFigures[] = [];
  // Interleaved, so that a busy moment of the machine spreads over every figure.
  for (let round = 0; round < ROUNDS; round += 1) {
    sqlite.push(await measureIngest({ ...DEFAULT_STORAGE, backend: 'sqlite' }));
    sqliteRaw.push(await measureSqliteInsertRate({ rows: MESSAGES, channels: CHANNELS, batch: 500 }));
    if (round < OTHER_WAY_ROUNDS) otherWay.push(await measureIngest({ ...DEFAULT_STORAGE, backend: 'sqlite', writerThread: threadByDefault ? 'off' : 'on' }));
  }
  const metrics = backendMetrics('SQLite', sqlite, sqliteRaw);
  metrics.push(...loopMetrics('SQLite', sqlite), ...writerThreadMetrics(threadByDefault, otherWay), ...(await sqliteInUse()));
  const notes = [
    `${MESSAGES} messages per round, ${ROUNDS} rounds, each on a fresh store and from a collected heap; then one round on a store that already holds ${IN_USE_ARCHIVED.toLocaleString('en-US')} messages`,
    'raw batch insert: the same rows, search text included, with no Magpie code in between, WAL checkpoints in a thread as the bot runs them',
    'a message counts once its ingest resolved: history row and full-text transcript row committed (group commit, survives kill -9); its vector follows in the background and search scans it exactly meanwhile',
    'the fake gateway runs in a thread of its own (Discord is on other machines); discord.js, the adapter, the runtime and the store share the main thread, except that on SQLite with the writer thread a group commit of more than one message runs there',
  ];
  const postgres: BenchPostgres | undefined = await postgresForBench();
  if (!postgres) {
    notes.push('PostgreSQL figures skipped: no PostgreSQL answered at MAGPIE_BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test)');
  } else {
    const rounds: IngestFigures[] = [];
    const raw: number[] = [];
    try {
      for (let round = 0; round < ROUNDS; round += 1) {
        rounds.push(await postgres.withSchema((storage, env) => measureIngest(storage, env)));
        raw.push(await postgres.withSchema((storage, env) => measurePostgresInsertRate({ storage, env, rows: MESSAGES, channels: CHANNELS, batch: 500 })));
      }
      metrics.push(...backendMetrics('PostgreSQL', rounds, raw), ...(await postgresInUse(postgres)));
      notes.push(`PostgreSQL: ${postgres.describe}, a fresh schema per round, dropped after`);
      metrics.push(...(await throughDelay(postgres, rawRate(raw))));
      notes.push(
        `PostgreSQL through a TCP proxy adding 0, ${PROXY_DELAYS_MS.slice(1).join(' and ')} ms each way (a database on another host): ${PROXY_ROUNDS} bursts of ${PROXY_MESSAGES} messages per delay, each on a fresh schema; the proxy runs in a thread of its own, as the distance it stands for costs the bot nothing; a round trip is the client waiting for the server's answer (statements sent together in one write share one); statements count every answer asked for`,
      );
    } catch (error) {
      // The SQLite figures are printed all the same.
      notes.push(`PostgreSQL figures failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return { name: 'ingest: gateway → discord.js → runtime → group commit, SQLite and PostgreSQL', metrics, notes };
}
