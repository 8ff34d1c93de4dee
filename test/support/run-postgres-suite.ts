/**
 * `npm run test:postgres`: the store tests again, on PostgreSQL. Each test file works in schemas
 * of its own (see storage.ts); schemas left by earlier runs are dropped first. Without a
 * reachable server the run is skipped with the reason, except under CI=true, where it fails.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { TEST_DATABASE_URL } from './storage.js';

/**
 * The test files whose stores must behave the same on both backends: every file that touches
 * storage, slowest first (they overlap the rest). Left out, SQLite by nature: storage-full (a
 * full disk under the data dir's database), data-dir-lock (the file lock), index-faults (damaged
 * files beside the database); and report-browser, a browser check of the HTML, not of a store.
 * Files that test PostgreSQL whatever MAGPIE_TEST_STORAGE says (postgres-store, postgres-locks,
 * memory-backends, migrate-cli) run in the full suite already.
 */
export const POSTGRES_SUITE = [
  'replay-cli',
  'memory-vector-lag',
  'status-report-cli',
  'qa-cli',
  'discord-shards',
  'operator-cli',
  'export-cli',
  'memory-cli',
  'compaction-invariants',
  'discord-streaming',
  'discord-compaction',
  'branch',
  'chat-cli',
  'discord-outage',
  'memory-index',
  'discord-bot',
  'discord-start',
  'context-window-model',
  'worker',
  'chat-workers',
  'compaction-edge-cases',
  'channel-edge-cases',
  'compaction-log',
  'discord-edges',
  'privacy-cli',
  'compaction-llm',
  'discord-agent-turn',
  'deploy',
  'channel-runtime',
  'channel-unload',
  'memory-edges',
  'metrics-start',
  'privacy-rewrite',
  'discord-flood',
  'archive-outage',
  'chat-streaming',
  'discord-branch-worker',
  'ingest-durability',
  'memory-http-embedder',
  'memory-store',
  'privacy-commands',
  'privacy-delete',
  'qa-readme',
  'replay-input',
  'soak-small',
  'attachments',
  'context-calibration',
  'discord-gateway',
  'persona',
  'privacy-budget',
  'privacy-scope',
  'discord-concurrency',
  'discord-files-and-commands',
  'memory-tools',
];

const testDir = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

async function main(): Promise<number> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  try {
    await client.connect();
  } catch (error) {
    const reason = `PostgreSQL is not reachable at ${TEST_DATABASE_URL}: ${(error as Error).message}`;
    if (process.env.CI === 'true') {
      console.error(`test:postgres: ${reason}`);
      return 1;
    }
    console.log(`test:postgres: skipped, ${reason}`);
    return 0;
  }
  const stale = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 't\\_%'`);
  for (const row of stale.rows as Array<{ nspname: string }>) await client.query(`DROP SCHEMA IF EXISTS "${row.nspname}" CASCADE`);
  await client.end();
  const files = POSTGRES_SUITE.map((name) => path.join(testDir, `${name}.test.js`)).filter((file) => existsSync(file));
  const run = spawnSync(process.execPath, ['--test', '--test-concurrency=2', ...files], {
    stdio: 'inherit',
    env: { ...process.env, MAGPIE_TEST_STORAGE: 'postgres' },
  });
  return run.status ?? 1;
}

process.exitCode = await main();
