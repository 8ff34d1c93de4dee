/**
 * Raw PostgreSQL write rate through `PgPoolClient`, past loopback: a TCP proxy adds +0, +1 and
 * +5 ms per direction (a 0, 2 or 10 ms round trip), and the benchmark prints, at each delay, the
 * multi-row insert rate, the round trips per batch the proxy counted (Q and Sync messages, and
 * the exchanges the client actually waited for), and the event loop's delay meanwhile.
 *
 * Four shapes: one multi-row INSERT per batch outside a transaction (a group commit written as
 * one statement), eight of them issued together (pipelined on the shared connection), a
 * transaction of three such statements (BEGIN travels with the first), and eight one-statement
 * transactions side by side on the pool.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pg from 'pg';
import { PgPoolClient } from '../src/storage/postgres/pg-pool-client.js';
import { startDelayedPostgres, type DelayedPostgres } from '../test/support/tcp-delay-proxy.js';
import type { BenchMetric, BenchReport } from './harness.js';
import { postgresForBench } from './postgres-bench.js';

const DELAYS_MS = [0, 1, 5];
const BATCH = 100;
/** Time spent per shape and delay: enough batches at +5 ms, little at loopback. */
const SHAPE_BUDGET_MS = 1_500;
const PARALLEL = 8;

const INSERT = `INSERT INTO history (channel_id, seq, message_id, content, created_at)
  SELECT c, s, m, t, @now FROM unnest(@channels::text[], @seqs::bigint[], @ids::text[], @texts::text[]) AS u(c, s, m, t)
  ON CONFLICT DO NOTHING`;

interface ShapeFigures {
  rowsPerSecond: number;
  roundTripsPerBatch: number;
  exchangesPerBatch: number;
  loopP99Ms: number;
  loopMaxMs: number;
}

let nextSeq = 0;

/** One batch's parameters: `BATCH` rows over 1,000 channels (named: positional arrays would be spread, as in better-sqlite3). */
function batchValues(): Record<string, unknown> {
  const channels: string[] = [];
  const seqs: number[] = [];
  const ids: string[] = [];
  const texts: string[] = [];
  for (let index = 0; index < BATCH; index += 1) {
    const seq = (nextSeq += 1);
    channels.push(String(700_000_000_000_000_000n + BigInt(seq % 1_000)));
    seqs.push(seq);
    ids.push(`m${seq}`);
    texts.push(`alice: message ${seq}: the watering rota moves to thursdays from next week`);
  }
  return { now: Date.now(), channels, seqs, ids, texts };
}

async function measureShape(proxy: DelayedPostgres, sql: PgPoolClient, batchOnce: () => Promise<number>): Promise<ShapeFigures> {
  // Warm: connections open, statements parsed, the catalog asked.
  await batchOnce();
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  const trips = proxy.roundTrips();
  const exchanges = proxy.exchanges();
  histogram.enable();
  const started = performance.now();
  let batches = 0;
  let rows = 0;
  while (performance.now() - started < SHAPE_BUDGET_MS || batches < 5) {
    rows += await batchOnce();
    batches += 1;
  }
  const elapsed = performance.now() - started;
  histogram.disable();
  void sql;
  return {
    rowsPerSecond: rows / (elapsed / 1_000),
    roundTripsPerBatch: (proxy.roundTrips() - trips) / (rows / BATCH),
    exchangesPerBatch: (proxy.exchanges() - exchanges) / (rows / BATCH),
    loopP99Ms: histogram.percentile(99) / 1e6,
    loopMaxMs: histogram.max / 1e6,
  };
}

export async function run(): Promise<BenchReport> {
  const postgres = await postgresForBench();
  if (!postgres) return { name: 'pg-raw', metrics: [], notes: ['PostgreSQL did not answer (MAGPIE_BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test): skipped'] };
  const url = process.env.MAGPIE_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const metrics: BenchMetric[] = [];
  const schema = `bench_raw_${process.pid}`;
  for (const delay of DELAYS_MS) {
    const proxy = await startDelayedPostgres(url, delay);
    const sql = await PgPoolClient.connect({ url: proxy.url, schema, applicationName: 'magpie bench pg-raw', maxConnections: PARALLEL + 2 });
    try {
      await sql.exec(`DROP TABLE IF EXISTS history; CREATE TABLE history (channel_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL,
        content TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (channel_id, seq))`);
      const insert = sql.prepare(INSERT);
      const single = await measureShape(proxy, sql, async () => (await insert.run(batchValues())).changes);
      const transaction = await measureShape(proxy, sql, () =>
        sql.transaction(async () => {
          let changed = 0;
          for (let part = 0; part < 3; part += 1) changed += (await insert.run(batchValues())).changes;
          return changed;
        }),
      );
      const parallel = await measureShape(proxy, sql, async () => {
        const counts = await Promise.all(
          Array.from({ length: PARALLEL }, () => sql.transaction(async () => (await insert.run(batchValues())).changes)),
        );
        return counts.reduce((sum, count) => sum + count, 0);
      });
      const pipelined = await measureShape(proxy, sql, async () => {
        const counts = await Promise.all(Array.from({ length: PARALLEL }, async () => (await insert.run(batchValues())).changes));
        return counts.reduce((sum, count) => sum + count, 0);
      });
      const label = `+${delay} ms`;
      for (const [shape, figures] of [
        ['one INSERT per batch', single],
        [`${PARALLEL} INSERTs in flight (pipelined)`, pipelined],
        ['transaction of 3 INSERTs', transaction],
        [`${PARALLEL} transactions side by side`, parallel],
      ] as const) {
        metrics.push({ name: `${label}, ${shape}: insert rate (${BATCH}-row batches)`, value: Math.round(figures.rowsPerSecond), unit: 'rows/s' });
        metrics.push({ name: `${label}, ${shape}: round trips per ${BATCH}-row batch (Q + Sync)`, value: round2(figures.roundTripsPerBatch), unit: '' });
        metrics.push({ name: `${label}, ${shape}: exchanges waited for per batch`, value: round2(figures.exchangesPerBatch), unit: '' });
        metrics.push({ name: `${label}, ${shape}: event-loop delay p99 / max`, value: round2(figures.loopP99Ms), unit: `ms / ${figures.loopMaxMs.toFixed(1)} ms` });
      }
    } finally {
      await sql.exec(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await sql.close();
      await proxy.close();
    }
  }
  metrics.push(...(await pointReads(url, schema)));
  await dropLeftovers(url, schema);
  return {
    name: 'pg-raw',
    metrics,
    notes: [
      `PostgreSQL at ${postgres.describe} through a TCP proxy adding the stated delay per direction`,
      'round trips count Q and Sync messages; exchanges count the times the client waited for the server (pipelined messages share one)',
    ],
  };
}

/** What one statement costs the main thread: point reads on loopback with no proxy (its CPU would count too). */
async function pointReads(url: string, schema: string): Promise<BenchMetric[]> {
  const sql = await PgPoolClient.connect({ url, schema, applicationName: 'magpie bench pg-raw' });
  try {
    await sql.exec(`DROP TABLE IF EXISTS history; CREATE TABLE history (channel_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL,
      content TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (channel_id, seq))`);
    await sql.prepare(INSERT).run(batchValues());
    const read = sql.prepare('SELECT content FROM history WHERE channel_id = ? AND seq = ?').pluck();
    const calls = 4_000;
    const inFlight = 8;
    for (let index = 0; index < 200; index += 1) await read.get('700000000000000001', 1);
    const cpu = process.cpuUsage();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: inFlight }, async (_, lane) => {
        for (let index = lane; index < calls; index += inFlight) await read.get(String(700_000_000_000_000_000n + BigInt(index % 1_000)), index);
      }),
    );
    const elapsed = performance.now() - started;
    const used = process.cpuUsage(cpu);
    return [
      { name: `loopback, no proxy: point reads (${inFlight} in flight)`, value: Math.round(calls / (elapsed / 1_000)), unit: 'reads/s' },
      { name: 'loopback, no proxy: process CPU per read', value: Math.round((used.user + used.system) / calls), unit: 'µs' },
    ];
  } finally {
    await sql.close();
  }
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}

async function dropLeftovers(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
