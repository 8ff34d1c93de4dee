import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ALL_MIGRATIONS } from '../../src/app/migrations.js';
import { openDatabase } from '../../src/storage/database.js';
import { openStorageForWriting } from '../../src/storage/open-storage.js';
import type { SqlClient } from '../../src/storage/sql-client.js';
import { freshSchema } from './postgres-available.js';
import { TEST_DATABASE_URL } from './storage.js';

/** An open store of one backend and the data dir beside it (index files). */
export interface BackendUnderTest {
  db: SqlClient;
  dir: string;
}

/**
 * Runs `work` with a fresh SQLite data dir and a fresh PostgreSQL schema (each with a data dir of
 * its own), then closes both and removes the dirs: for tests that compare the two backends'
 * answers. `command` names the writer in the schema's lock table.
 */
export async function withBothBackends<T>(command: string, work: (sqlite: BackendUnderTest, postgres: BackendUnderTest) => Promise<T>): Promise<T> {
  const sqliteDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  const pgDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  try {
    const sqlite = await openDatabase(sqliteDir, ALL_MIGRATIONS);
    try {
      const postgres = await openStorageForWriting({ backend: 'postgres', dataDir: pgDir, url: TEST_DATABASE_URL, schema: freshSchema() }, ALL_MIGRATIONS, {
        command,
        writerKey: command.replace(/\W+/g, '-'),
      });
      try {
        return await work({ db: sqlite, dir: sqliteDir }, { db: postgres.db, dir: pgDir });
      } finally {
        await postgres.close();
      }
    } finally {
      await sqlite.close();
    }
  } finally {
    rmSync(sqliteDir, { recursive: true, force: true });
    rmSync(pgDir, { recursive: true, force: true });
  }
}

/** Runs `work` with a fresh temporary directory, removed after. */
export async function withTempDir<T>(work: (dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  try {
    return await work(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
