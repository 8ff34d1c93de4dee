/**
 * The whole `memory_search` on PostgreSQL, with the SQLite benchmark's corpus and queries: 100,000
 * entries in one channel and 10,000 in another, on a fresh schema at loopback. Each search is a
 * handful of round trips and one full-text statement that reads every row matching its words,
 * so its tail is the queries whose rarest kept word is said in thousands of messages.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore } from '../src/memory/index.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { openStorageForWriting } from '../src/storage/open-storage.js';
import type { BenchMetric, BenchReport } from './harness.js';
import { chatLines } from './memory-corpus.js';
import { CHANNEL, indexAll, insert, makeQueries, measureSearch } from './memory-search.js';
import { postgresForBench } from './postgres-bench.js';

const NAME = 'memory-search-postgres: full memory_search on PostgreSQL (hash embedder, dimension 256, limit 10)';

export async function run(): Promise<BenchReport> {
  const postgres = await postgresForBench();
  if (!postgres) return { name: NAME, metrics: [], notes: ['PostgreSQL did not answer (MAGPIE_BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test): skipped'] };
  const metrics: BenchMetric[] = [];
  await postgres.withSchema(async (storage, env) => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-pg-search-'));
    const opened = await openStorageForWriting({ backend: 'postgres', dataDir, url: env[storage.urlEnv]!, schema: storage.schema }, ALL_MIGRATIONS, {
      command: 'magpie bench',
    });
    const store = await openMemoryStore({ db: opened.db, dataDir, settings: DEFAULTS.memory });
    try {
      await insert(store, 'other-channel', chatLines(10_000, 6), 0);
      await insert(store, CHANNEL, chatLines(100_000, 5), 0);
      await indexAll(store);
      // The planner's statistics as autovacuum would leave them, so the plans are a running store's.
      await opened.db.exec('ANALYZE memory_items');
      metrics.push(...(await measureSearch(store, makeQueries(), '100,000 on PostgreSQL')));
    } finally {
      await store.close();
      await opened.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
  return { name: NAME, metrics, notes: [`PostgreSQL at ${postgres.describe}, loopback; each query's word counts are counted at its first search and kept 30 s`] };
}
