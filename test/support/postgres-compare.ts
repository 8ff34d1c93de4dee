/**
 * For tests that need PostgreSQL whatever backend the run tests (`magpie migrate`): a client on
 * the test server, and the rows of a table on either side in one comparable form.
 */
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { DATABASE_FILE } from '../../src/storage/database.js';
import { requirePostgres } from './postgres-available.js';
import { TEST_DATABASE_URL } from './storage.js';

/**
 * A connected client on the test server, or undefined after `t.skip` with the reason (under
 * CI=true an unreachable server fails the test instead: there the PostgreSQL checks must run).
 */
export async function postgresOrSkip(t: TestContext): Promise<pg.Client | undefined> {
  if (!(await requirePostgres(t))) return undefined;
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  return client;
}

export async function dropSchema(client: pg.Client, schema: string): Promise<void> {
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

/** The tables of a SQLite data dir that carry data (no FTS5 tables, no migration record). */
export function sqliteTables(dir: string): string[] {
  const db = new Database(join(dir, DATABASE_FILE), { readonly: true });
  try {
    const names = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).pluck().all() as string[]);
    return names.filter((name) => !name.startsWith('sqlite_') && !name.startsWith('memory_fts') && name !== 'schema_migrations');
  } finally {
    db.close();
  }
}

/** Every row of a SQLite table as sorted JSON lines, values in one form (integers as text, bytes as hex). */
export function sqliteRows(dir: string, table: string): { columns: string[]; rows: string[] } {
  const db = new Database(join(dir, DATABASE_FILE), { readonly: true });
  try {
    const columns = (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(table) as string[]);
    const rows = db.prepare(`SELECT ${columns.map((column) => `"${column}"`).join(', ')} FROM "${table}"`).raw(true).safeIntegers(true).all() as unknown[][];
    return { columns, rows: rows.map(comparable).sort() };
  } finally {
    db.close();
  }
}

/** The same columns of the PostgreSQL table, in the same form. */
export async function postgresRows(client: pg.Client, schema: string, table: string, columns: readonly string[]): Promise<string[]> {
  const result = await client.query({ text: `SELECT ${columns.map((column) => `"${column}"`).join(', ')} FROM "${schema}"."${table}"`, rowMode: 'array' });
  return (result.rows as unknown[][]).map(comparable).sort();
}

export async function postgresCount(client: pg.Client, schema: string, table: string): Promise<number> {
  const result = await client.query(`SELECT count(*)::int AS rows FROM "${schema}"."${table}"`);
  return (result.rows[0] as { rows: number }).rows;
}

function comparable(row: unknown[]): string {
  return JSON.stringify(
    row.map((value) => {
      if (value === null || value === undefined) return null;
      if (Buffer.isBuffer(value)) return `hex:${value.toString('hex')}`;
      if (typeof value === 'bigint' || typeof value === 'number') return String(value);
      return value;
    }),
  );
}
