import { UnsetVariableError } from '../config/problems.js';
import type { MagpieConfig, StorageSettings } from '../config/types.js';
import { openDataDirForWriting, type BackgroundCheckpoints } from './data-dir.js';
import { redactUrl } from './postgres/pg-error.js';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { closeDatabase, DATABASE_FILE, ensureDataDir, openDatabase, type Migration, type SchemaStepListener } from './database.js';
import { openDatabaseReadOnly } from './read-only.js';
import { SerialClient } from './serial-client.js';
import { listDataDirs } from './shard-dirs.js';
import type { OpenedStorage, StorageTarget } from './storage-target.js';

export { describeTarget, type OpenedStorage, type PostgresLimits, type StorageConnection, type StorageTarget } from './storage-target.js';

/** The PostgreSQL URL in the variable `[storage] url_env` names; undefined when it is unset or blank. */
export function postgresUrl(storage: Pick<StorageSettings, 'urlEnv'>, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env[storage.urlEnv]?.trim() || undefined;
}

/**
 * The target `[storage]` names; PostgreSQL needs its URL in the environment variable `url_env`
 * names. Without it: an `UnsetVariableError`, a configuration problem (exit 3) like a missing
 * Discord token, not bad usage of the command.
 */
export function storageTarget(config: Pick<MagpieConfig, 'storage'>, dataDir: string, env: NodeJS.ProcessEnv = process.env): StorageTarget {
  const storage = config.storage;
  if (storage.backend === 'sqlite') return { backend: 'sqlite', dataDir };
  const url = postgresUrl(storage, env);
  if (!url) {
    throw new UnsetVariableError(storage.urlEnv, `[storage] backend = "postgres" needs a connection URL in ${storage.urlEnv}, which is not set`, {
      context: { key: 'storage.url_env' },
      hint: `export ${storage.urlEnv}=postgres://user@host:5432/database (or name another variable in [storage] url_env)`,
    });
  }
  // Anything else would be tried as PostgreSQL anyway and fail as a lost connection
  // ("ENOTFOUND base" for "not-a-url"), far from the variable that is wrong.
  if (!isPostgresUrl(url)) {
    throw new UnsetVariableError(storage.urlEnv, `${storage.urlEnv} must hold a postgres:// or postgresql:// URL for [storage] backend = "postgres", got ${shownUrl(url)}`, {
      context: { key: 'storage.url_env' },
      hint: `export ${storage.urlEnv}=postgres://user@host:5432/database`,
    });
  }
  return {
    backend: 'postgres',
    dataDir,
    url,
    schema: storage.schema,
    limits: { statementTimeoutMs: storage.statementTimeoutMs, connectTimeoutMs: storage.connectTimeoutMs, poolSize: storage.poolSize },
  };
}

function isPostgresUrl(url: string): boolean {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'postgres:' || parsed.protocol === 'postgresql:';
  } catch {
    return false;
  }
}

/** The URL as it can be shown: its password hidden (it may be a mysql:// URL with one). */
function shownUrl(url: string): string {
  return URL.canParse(url) ? `'${redactUrl(url)}'` : 'text that is not a URL';
}

/**
 * Refuses a `[storage]` that cannot be used as the environment stands (PostgreSQL without its
 * URL), for commands that start other things first (the metrics endpoint, Discord): they call
 * this before those, so the configuration problem is reported before anything else happens.
 */
export function checkStorageEnvironment(config: Pick<MagpieConfig, 'storage'>, env: NodeJS.ProcessEnv = process.env): void {
  storageTarget(config, '', env);
}

/**
 * Opens the store for its one writer. SQLite: the data dir's writer lock, then the database.
 * PostgreSQL: the schema is migrated, then an advisory lock per `writerKey` (one per shard) is
 * taken on the writer's connection, so two processes never write the same channels.
 */
export async function openStorageForWriting(
  target: StorageTarget,
  migrations: readonly Migration[],
  options: { command: string; writerKey?: string; onSchemaStep?: SchemaStepListener } & BackgroundCheckpoints,
): Promise<OpenedStorage> {
  if (target.backend === 'sqlite') {
    const writable = await openDataDirForWriting(target.dataDir, migrations, options);
    return { target, dataDir: target.dataDir, db: writable.db, close: () => writable.close() };
  }
  ensureDataDir(target.dataDir);
  return (await postgres()).openPostgresForWriting(target, migrations, options);
}

/**
 * Opens the store to read beside a running writer: nothing is created, migrated or locked.
 * `anyVersion` accepts a store an older Magpie wrote (status and report check for the tables they
 * read); otherwise a store missing a schema step is refused.
 */
export async function openStorageForReading(
  target: StorageTarget,
  migrations: readonly Migration[],
  options: { command?: string; anyVersion?: boolean } = {},
): Promise<OpenedStorage> {
  if (target.backend === 'sqlite') {
    const db = options.anyVersion ? openDatabaseReadOnly(target.dataDir) : await openDatabase(target.dataDir, migrations, { readOnly: true });
    return { target, dataDir: target.dataDir, db, close: () => closeDatabase(db) };
  }
  return (await postgres()).openPostgresForReading(target, migrations, options);
}

/**
 * Opens the store beside its running writer, to leave it a request (an erasure) in a table the
 * writer reads: no writer lock, no migration (the writer's schema is what it is).
 */
export async function openStorageBesideWriter(target: StorageTarget, command: string): Promise<OpenedStorage> {
  if (target.backend === 'postgres') {
    const db = await (await postgres()).connectPostgres(target, command);
    return { target, dataDir: target.dataDir, db, close: () => db.close() };
  }
  const connection = new Database(join(target.dataDir, DATABASE_FILE), { fileMustExist: true });
  connection.pragma('busy_timeout = 5000');
  const db = new SerialClient(connection);
  return { target, dataDir: target.dataDir, db, close: () => db.close() };
}

/**
 * PostgreSQL's side of opening a store, loaded when a PostgreSQL store is opened: a process on
 * SQLite (every command an operator runs against a data dir) does not load the pg client.
 */
function postgres(): Promise<typeof import('./postgres/open-postgres.js')> {
  return import('./postgres/open-postgres.js');
}

/** One store of a deployment: the data dir (or a shard's) on SQLite; the one schema on PostgreSQL. */
export interface StorageEntry {
  dir: string;
  shardId?: number;
  target: StorageTarget;
}

/**
 * Every store a reader looks across. SQLite: the data dir and its `shard-<N>` dirs that hold a
 * database (empty when there is none). PostgreSQL: the one schema every shard shares.
 */
export function listStorage(config: Pick<MagpieConfig, 'storage'>, dataDir: string, env: NodeJS.ProcessEnv = process.env): StorageEntry[] {
  const target = storageTarget(config, dataDir, env);
  if (target.backend === 'postgres') return [{ dir: dataDir, target }];
  return listDataDirs(dataDir).map((entry) => ({ ...entry, target: { backend: 'sqlite', dataDir: entry.dir } }));
}
