/**
 * One test run's claim on the PostgreSQL test database: a run id whose advisory lock is held
 * while the run lasts, schemas of finished or killed runs dropped first, its own dropped at the
 * end. Each test file then works in schemas named `t<run id>_…` (see storage.ts).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TEST_DATABASE_URL } from './storage.js';

export interface PostgresRun {
  runId: string;
  /** Drops this run's schemas and lets go of the server. */
  finish(): Promise<void>;
}

/**
 * Starts a run, or says why PostgreSQL cannot be used: `{ skipped }` outside CI, `{ failed }`
 * under CI=true, where an unreachable server must fail the suite rather than pass it unseen.
 */
export async function startPostgresRun(): Promise<PostgresRun | { skipped: string } | { failed: string }> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    const reason = `PostgreSQL is not reachable at ${TEST_DATABASE_URL}: ${(error as Error).message}`;
    return process.env.CI === 'true' ? { failed: reason } : { skipped: reason };
  }
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
  // Schemas of tests that used PostgreSQL outside a suite run (`t_…`) hold no run's lock: those
  // migrated long ago are over, those migrated lately may belong to a test file run by hand now.
  const loose = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 't\\_%'`);
  for (const { nspname } of loose.rows as Array<{ nspname: string }>) {
    if (!(await looseSchemaIsOld(client, nspname))) continue;
    await client.query(`DROP SCHEMA IF EXISTS "${nspname}" CASCADE`);
  }
  return {
    runId,
    async finish() {
      const own = await client.query(`SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, [`t${runId}\\_%`]);
      for (const { nspname } of own.rows as Array<{ nspname: string }>) await client.query(`DROP SCHEMA IF EXISTS "${nspname}" CASCADE`);
      await client.end();
    },
  };
}

/** A test file run by hand takes minutes: a loose schema migrated longer ago than this is left over. */
const LOOSE_SCHEMA_AGE_MS = 30 * 60_000;

/** Whether a loose schema's newest migration (its creation, as a rule) is older than `LOOSE_SCHEMA_AGE_MS`. */
async function looseSchemaIsOld(client: pg.Client, schema: string): Promise<boolean> {
  try {
    const newest = await client.query(`SELECT max(applied_at)::float8 AS at FROM "${schema}".schema_migrations`);
    const at = (newest.rows[0] as { at: number | null }).at;
    return at === null || Date.now() - at > LOOSE_SCHEMA_AGE_MS;
  } catch {
    return true; // No migrations table: never used, or broken.
  }
}
