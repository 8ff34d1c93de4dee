import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MagpieError } from '../common/errors.js';
import { DATABASE_FILE } from './database.js';
import { SerialClient } from './serial-client.js';
import type { SqlClient } from './sql-client.js';
import { storageDialectFor } from './storage-dialect.js';

/**
 * Opens a data directory's database for reading only (`magpie status`, `magpie report`): no
 * migration, no write, so it can run beside a live bot and never creates an empty database.
 */
export function openDatabaseReadOnly(dataDir: string): SqlClient {
  const file = join(dataDir, DATABASE_FILE);
  if (!existsSync(file)) {
    throw new MagpieError('no_data', `no Magpie data in ${dataDir} (${DATABASE_FILE} not found)`, {
      hint: 'pass --data-dir with a directory written by `magpie start`, `magpie chat` or `magpie replay`',
    });
  }
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true });
    db.pragma('busy_timeout = 5000');
    return new SerialClient(db);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new MagpieError('data_dir_unusable', `cannot read the database in ${dataDir}: ${reason}`, { cause: error, context: { dataDir } });
  }
}

/** Whether a table exists (a data dir written by an older version may lack newer ones). */
export async function hasTable(db: SqlClient, name: string): Promise<boolean> {
  return (await db.prepare(storageDialectFor(db).tableExists).get(name)) !== undefined;
}
