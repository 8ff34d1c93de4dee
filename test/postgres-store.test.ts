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
import assert from 'node:assert/strict';
import pg from 'pg';
import { PgError } from '../src/storage/postgres/pg-error.js';
import { storageError } from '../src/storage/storage-error.js';
import type { StorageTarget } from '../src/storage/open-storage.js';
import { POSTGRES_ONLY_CONTRACT, STORE_CONTRACT, type ContractBackend, type ContractCase } from './support/store-contract.js';
import { freshSchema, postgresProblem } from './support/postgres-available.js';
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
    const schema = freshSchema('t_contract');
    schemas.push(schema);
    return { backend: 'postgres', dataDir: freshDir(), url: TEST_DATABASE_URL, schema };
  },
};

const unavailable = await postgresProblem();
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

test('PostgreSQL failures an operator can act on become storage errors that say what to do', () => {
  const cases: Array<[string, string, boolean, RegExp]> = [
    ['53100', 'storage_full', true, /out of disk space/],
    ['58030', 'storage_io', true, /I\/O error/],
    ['40P01', 'storage_busy', true, /overloaded or held a lock/],
    ['57014', 'storage_busy', true, /overloaded or held a lock/],
    ['25006', 'storage_read_only', false, /refuses writes/],
    ['XX001', 'storage_corrupt', false, /damaged data/],
    ['57P01', 'storage_connection', false, /dropped the connection/],
    ['08006', 'storage_connection', false, /dropped the connection/],
  ];
  for (const [sqlstate, code, retryable, message] of cases) {
    const problem = storageError('/data', new PgError('the server said no', sqlstate, undefined));
    assert.ok(problem, sqlstate);
    assert.deepEqual([problem.code, problem.retryable], [code, retryable], sqlstate);
    assert.match(problem.message, message);
    assert.match(problem.message, new RegExp(`\\(${sqlstate}: the server said no\\)`));
    assert.ok(problem.hint && !problem.hint.includes('data dir'), `${sqlstate}: the hint is about the server, not a data dir`);
  }
  // A constraint or syntax error is the program's, not the store's.
  assert.equal(storageError('/data', new PgError('duplicate key', '23505', 'history_entries_pkey')), undefined);
  assert.equal(storageError('/data', new PgError('syntax error', '42601', undefined)), undefined);
});

after(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  if (unavailable || schemas.length === 0) return;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});
