/**
 * `npm run test:postgres`: the store tests again, on PostgreSQL. Each test file works in schemas
 * of its own (see storage.ts), named after the run; schemas left by finished runs are dropped. Without a
 * reachable server the run is skipped with the reason, except under CI=true, where it fails.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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
  'busy-channel',
  'window-replay',
  'worker',
  'chat-workers',
  'compaction-edge-cases',
  'channel-edge-cases',
  'compaction-log',
  'prompt-cache-requests',
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
  'search-phrasing',
  'search-time',
  'search-migration',
  'privacy-commands',
  'privacy-delete',
  'privacy-bytes',
  'privacy-running-bot',
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
  'group-commit',
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
  // This run holds a lock named after its id while it lasts; schemas of runs whose lock is free
  // (finished or killed) are dropped, those of a run still going (another checkout) are not.
  const runId = randomBytes(3).toString('hex');
  await client.query('SELECT pg_advisory_lock(hashtext($1))', [`magpie-test-run:${runId}`]);
  const schemas = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname ~ '^t[0-9a-f]{6}_'`);
  for (const { nspname } of schemas.rows as Array<{ nspname: string }>) {
    const owner = nspname.slice(1, 7);
    const free = await client.query('SELECT pg_try_advisory_lock(hashtext($1)) AS free', [`magpie-test-run:${owner}`]);
    if (!(free.rows[0] as { free: boolean }).free) continue;
    await client.query(`DROP SCHEMA IF EXISTS "${nspname}" CASCADE`);
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`magpie-test-run:${owner}`]);
  }
  // Schemas of tests that use PostgreSQL outside a suite run (`t_…`) are over by now.
  const loose = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 't\\_%'`);
  for (const { nspname } of loose.rows as Array<{ nspname: string }>) await client.query(`DROP SCHEMA IF EXISTS "${nspname}" CASCADE`);
  const files = POSTGRES_SUITE.map((name) => path.join(testDir, `${name}.test.js`)).filter((file) => existsSync(file));
  const run = spawnSync(process.execPath, ['--test', '--test-concurrency=2', ...files], {
    stdio: 'inherit',
    env: { ...process.env, MAGPIE_TEST_STORAGE: 'postgres', MAGPIE_TEST_RUN: runId },
  });
  const own = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, [`t${runId}\\_%`]);
  for (const { nspname } of own.rows as Array<{ nspname: string }>) await client.query(`DROP SCHEMA IF EXISTS "${nspname}" CASCADE`);
  await client.end();
  return run.status ?? 1;
}

process.exitCode = await main();
