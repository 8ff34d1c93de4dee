/**
 * `npm run test:postgres`: the store tests again, on PostgreSQL, alone (`npm test` runs them
 * beside the SQLite suite, see run-suite.ts). Each test file works in schemas of its own (see
 * storage.ts), named after the run; schemas left by finished runs are dropped. Without a
 * reachable server the run is skipped with the reason, except under CI=true, where it fails.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startPostgresRun } from './postgres-run.js';

/**
 * The files that run again on PostgreSQL: those whose stores and SQL behave differently there
 * (history and splices, archive and full text, vectors, privacy propagation, budgets, workers,
 * personas, attachments, calibration, the compaction log, group commit, crash durability,
 * catch-up points, shards on one schema) and the CLI paths that read and write a whole data set.
 * The files that only drive those same stores through Discord or the terminal (streaming, slash
 * commands, flood control, chat) stay on SQLite: the store calls under them are the ones listed
 * here, and the store contract (postgres-store), memory-backends, postgres-locks, migrate-cli and
 * the PostgreSQL client's own files (pg-pool-client, pg-faults, pg-session, pg-round-trips) run on
 * PostgreSQL in the main run anyway; a second copy would also contend for the same advisory locks. Left out, SQLite by nature: storage-full,
 * data-dir-lock, index-faults. Slowest first, so they overlap the rest.
 */
export const POSTGRES_SUITE = [
  'replay-cli',
  'memory-vector-lag',
  'status-report-cli',
  'discord-shards',
  'memory-cli',
  'compaction-invariants',
  'discord-outage',
  'discord-start-retry',
  'memory-index',
  'busy-channel',
  'worker',
  'compaction-edge-cases',
  'channel-edge-cases',
  'compaction-log',
  'privacy-cli',
  'channel-runtime',
  'channel-unload',
  'memory-edges',
  'privacy-rewrite',
  'census',
  'store-version',
  'chat-storage-health',
  'replay-lines',
  'index-file-writes',
  'privacy-memory-rewrite',
  'archive-outage',
  'ingest-durability',
  'memory-store',
  'search-phrasing',
  'search-new-words',
  'search-time',
  'search-migration',
  'message-id-index',
  'sql-run-each',
  'privacy-delete',
  'privacy-bytes',
  'privacy-running-bot',
  'privacy-running-writer',
  'attachments',
  'context-calibration',
  'persona',
  'privacy-budget',
  'privacy-scope',
  'memory-tools',
  'group-commit',
  'processes',
  'outside-text',
  'outside-text-cli',
  'discord-privacy-turn',
  'model-request-order',
  'erasure-request-wait',
];

/**
 * In `npm test`, three slow files repeat on PostgreSQL only the tests that reach the store
 * (a whole replay written there and read back by status and report; a kill -9 mid-replay and
 * the re-run; a start that waits for the embedder to reopen the store): their other tests are
 * about flags, signals, progress lines and Discord, which do not depend on the backend. `npm run test:postgres` still runs them whole.
 */
export const POSTGRES_TEST_NAMES: Readonly<Record<string, string>> = {
  'replay-cli': '^(8\\. kill -9 mid-replay|a bad line stops the replay|--summarizer llm and --cost-replies without a model|a second --data-dir on PostgreSQL shares the schema)',
  'status-report-cli': '^(replay --report, then status and report read the same compaction log|status counts what the runtime that wrote the data counted)',
  // Waiting out Discord is the same on both backends; reopening the store while the embedder is down is not.
  'discord-start-retry': '^an embedder that is not up yet',
};

const testDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

async function main(): Promise<number> {
  const run = await startPostgresRun();
  if ('failed' in run) {
    console.error(`test:postgres: ${run.failed}`);
    return 1;
  }
  if ('skipped' in run) {
    console.log(`test:postgres: skipped, ${run.skipped}`);
    return 0;
  }
  const files = POSTGRES_SUITE.map((name) => path.join(testDir, `${name}.test.js`)).filter((file) => existsSync(file));
  const child = spawnSync(process.execPath, ['--test', '--test-concurrency=2', ...files], {
    stdio: 'inherit',
    env: { ...process.env, MAGPIE_TEST_STORAGE: 'postgres', MAGPIE_TEST_RUN: run.runId },
  });
  await run.finish();
  return child.status ?? 1;
}

// Run by `npm run test:postgres`; imported by the whole-suite runner for the list only.
if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await main();
