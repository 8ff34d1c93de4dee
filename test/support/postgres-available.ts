/**
 * Tests that need PostgreSQL whatever MAGPIE_TEST_STORAGE says. Under CI=true a server that does
 * not answer is a failure; elsewhere the test is skipped with the reason.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TEST_DATABASE_URL } from './storage.js';

let checked: Promise<string | undefined> | undefined;

/** Undefined when PostgreSQL answers, else why not. */
export function postgresProblem(): Promise<string | undefined> {
  checked ??= (async () => {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return undefined;
    } catch (error) {
      return `PostgreSQL is not reachable at ${TEST_DATABASE_URL}: ${(error as Error).message}`;
    } finally {
      await client.end().catch(() => undefined);
    }
  })();
  return checked;
}

/** Skips the test (or fails it under CI) when PostgreSQL is not there; true when it is. */
export async function requirePostgres(context: { skip(message?: string): void }): Promise<boolean> {
  const problem = await postgresProblem();
  if (problem === undefined) return true;
  if (process.env.CI === 'true') throw new Error(`${problem} (CI=true: the PostgreSQL tests must run)`);
  context.skip(problem);
  return false;
}

/** A schema name no other test uses. */
export function freshSchema(prefix = 't'): string {
  return `${prefix}_${randomBytes(8).toString('hex')}`;
}
