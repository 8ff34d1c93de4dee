import type { SqlClient } from '../storage/sql-client.js';
import type { MemoryDialect } from './dialect.js';
import { postgresMemoryDialect } from './postgres-dialect.js';
import { sqliteMemoryDialect } from './sqlite-dialect.js';

/** The memory dialect of a client, from the dialect it declares. */
export function memoryDialectFor(db: Pick<SqlClient, 'dialect'>): MemoryDialect {
  return db.dialect === 'postgres' ? postgresMemoryDialect : sqliteMemoryDialect;
}
