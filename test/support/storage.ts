/**
 * Which store the tests run on. `npm test` runs the suite on SQLite, then the store tests again
 * with MAGPIE_TEST_STORAGE=postgres (`npm run test:postgres`): every helper that opens a
 * database, and every `magpie` process a test starts, then uses a PostgreSQL schema of its own,
 * named after the test's data dir so that a later command on the same dir finds the same data.
 */
import { createHash } from 'node:crypto';
import { ALL_MIGRATIONS } from '../../src/app/migrations.js';
import { openDatabase, type Migration } from '../../src/storage/database.js';
import { openStorageForWriting, type StorageTarget } from '../../src/storage/open-storage.js';
import { isPostgres, type SqlClient } from '../../src/storage/sql-client.js';
import type { MagpieConfig } from '../../src/config/types.js';

export const TEST_STORAGE: 'sqlite' | 'postgres' = process.env.MAGPIE_TEST_STORAGE === 'postgres' ? 'postgres' : 'sqlite';
export const TEST_DATABASE_URL = process.env.MAGPIE_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** The schema a data dir's data lives in when the tests run on PostgreSQL. */
function schemaForDir(dir: string): string {
  // `t<run>_…` inside a PostgreSQL suite run (its runner drops them), `t_…` otherwise.
  return `t${process.env.MAGPIE_TEST_RUN ?? ''}_${createHash('sha256').update(dir).digest('hex').slice(0, 20)}`;
}

/** Where a test's data dir keeps its data, on the backend this run tests. */
function testTarget(dir: string): StorageTarget {
  return TEST_STORAGE === 'postgres'
    ? { backend: 'postgres', dataDir: dir, url: TEST_DATABASE_URL, schema: schemaForDir(dir) }
    : { backend: 'sqlite', dataDir: dir };
}

/**
 * The database of a test's data dir, migrated: SQLite in the dir, or its PostgreSQL schema. On
 * PostgreSQL no writer lock is taken (several harnesses of one test may share a dir in turn).
 */
export async function openTestDatabase(dir: string): Promise<SqlClient> {
  if (TEST_STORAGE === 'sqlite') return openDatabase(dir, ALL_MIGRATIONS);
  const opened = await openStorageForWriting(testTarget(dir), ALL_MIGRATIONS, { command: 'magpie test', writerKey: `test-${process.pid}-${Math.random()}` });
  // Closing the client closes the whole store: its lock session too, or the process would not end.
  opened.db.close = () => opened.close();
  return opened.db;
}

/**
 * A test's data dir opened for writing with the given migrations only (a store as an older
 * version left it, for upgrade tests), on the backend this run tests.
 */
export async function openMigratedTo(
  dir: string,
  migrations: readonly Migration[],
  command: string,
): Promise<{ db: SqlClient; close(): Promise<void> }> {
  return await openStorageForWriting(testTarget(dir), migrations, { command, writerKey: command });
}

/** Environment for a `magpie` child process working on `dir`: empty on SQLite. */
export function storageEnv(dir: string): NodeJS.ProcessEnv {
  if (TEST_STORAGE === 'sqlite') return {};
  return { MAGPIE_STORAGE_BACKEND: 'postgres', MAGPIE_DATABASE_URL: TEST_DATABASE_URL, MAGPIE_STORAGE_SCHEMA: schemaForDir(dir) };
}

/**
 * `config` with its `[storage]` on the backend this run tests, for `openApp` (pass `appEnv` as
 * its env): the schema is the one of its data dir, so a later `magpie` on that dir finds the data.
 */
export function withTestStorage<T extends Pick<MagpieConfig, 'storage' | 'memory'>>(config: T, dataDir: string = config.memory.dataDir): T {
  if (TEST_STORAGE === 'sqlite') return config;
  return { ...config, storage: { ...config.storage, backend: 'postgres', urlEnv: 'MAGPIE_DATABASE_URL', schema: schemaForDir(dataDir) } };
}

/** The environment `openApp` needs on the tested backend (the URL `withTestStorage` points at). */
export function appEnv(): NodeJS.ProcessEnv {
  return TEST_STORAGE === 'sqlite' ? {} : { MAGPIE_DATABASE_URL: TEST_DATABASE_URL };
}

/**
 * Makes every insert into `table` whose row matches `condition` (SQL over NEW) fail, as a full
 * disk would midway through a transaction; returns what removes it.
 */
export async function failInserts(db: SqlClient, table: string, condition: string): Promise<() => Promise<void>> {
  if (!isPostgres(db)) {
    await db.exec(`CREATE TRIGGER fail_${table} BEFORE INSERT ON ${table} WHEN ${condition} BEGIN SELECT RAISE(ABORT, 'disk gone'); END`);
    return () => db.exec(`DROP TRIGGER fail_${table}`);
  }
  await db.exec(`CREATE FUNCTION fail_${table}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk gone'; END $$;
           CREATE TRIGGER fail_${table} BEFORE INSERT ON ${table} FOR EACH ROW WHEN (${condition}) EXECUTE FUNCTION fail_${table}()`);
  return () => db.exec(`DROP TRIGGER fail_${table} ON ${table}; DROP FUNCTION fail_${table}()`);
}
