/**
 * The store contract on both backends in one run, whatever MAGPIE_TEST_STORAGE says: the same
 * cases (support/store-contract.ts) on a SQLite data dir and on a PostgreSQL schema. Without a
 * reachable PostgreSQL the PostgreSQL half is skipped with the reason, except under CI=true,
 * where that is a failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import type { StorageTarget } from '../src/storage/open-storage.js';
import { POSTGRES_ONLY_CONTRACT, STORE_CONTRACT, type ContractBackend, type ContractCase } from './support/store-contract.js';
import { TEST_DATABASE_URL } from './support/storage.js';

const dirs: string[] = [];
function freshDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-contract-'));
  dirs.push(dir);
  return dir;
}

const schemas: string[] = [];
const sqlite: ContractBackend = { name: 'sqlite', freshTarget: () => ({ backend: 'sqlite', dataDir: freshDir() }) };
const postgres: ContractBackend = {
  name: 'postgres',
  freshTarget(): StorageTarget {
    // `t_` schemas are the tests' own: the PostgreSQL suite drops those left by earlier runs.
    const schema = `t_contract_${process.pid}_${schemas.length + 1}`;
    schemas.push(schema);
    return { backend: 'postgres', dataDir: freshDir(), url: TEST_DATABASE_URL, schema };
  },
};

/** Why PostgreSQL cannot be tested here, or undefined when it can. */
async function postgresUnavailable(): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return undefined;
  } catch (error) {
    return `PostgreSQL is not reachable at ${TEST_DATABASE_URL}: ${(error as Error).message}`;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const unavailable = await postgresUnavailable();
if (unavailable && process.env.CI !== 'true') console.log(`postgres-store: PostgreSQL cases skipped, ${unavailable}`);

function runCases(backend: ContractBackend, cases: readonly ContractCase[]): void {
  for (const contractCase of cases) test(contractCase.name, { timeout: 120_000 }, () => contractCase.run(backend));
}

describe('store contract on SQLite', () => runCases(sqlite, STORE_CONTRACT));

if (unavailable && process.env.CI === 'true') {
  test('PostgreSQL is reachable (CI=true)', () => {
    throw new Error(unavailable);
  });
} else {
  describe('store contract on PostgreSQL', { skip: unavailable ?? false }, () => {
    runCases(postgres, STORE_CONTRACT);
    runCases(postgres, POSTGRES_ONLY_CONTRACT);
  });
}

after(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  if (unavailable || schemas.length === 0) return;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});
