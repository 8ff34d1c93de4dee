import { InputError, MagpieError } from '../common/errors.js';
import type { MagpieConfig } from '../config/types.js';
import { openDataDirForWriting, type BackgroundCheckpoints } from './data-dir.js';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type { ChannelLocks } from './channel-locks.js';
import { closeDatabase, DATABASE_FILE, ensureDataDir, openDatabase, type Migration } from './database.js';
import { redactUrl } from './postgres/pg-error.js';
import type { PgHealth } from './postgres/pg-health.js';
import { applyPgMigrations, missingPgMigrations } from './postgres/pg-migrations.js';
import { PgPoolClient } from './postgres/pg-pool-client.js';
import { PgSession } from './postgres/pg-session.js';
import { SessionChannelLocks, STORAGE_WRITERS_TABLE, takeWriterLock, type HeldWriterLock } from './postgres/pg-session-locks.js';
import type { PgConnectionSettings } from './postgres/pg-settings.js';
import { openDatabaseReadOnly } from './read-only.js';
import { SerialClient } from './serial-client.js';
import type { SqlClient } from './sql-client.js';
import { listDataDirs } from './shard-dirs.js';

/** Where a process keeps its data: the data dir alone (SQLite), or PostgreSQL plus the data dir for index files. */
export type StorageTarget =
  | { backend: 'sqlite'; dataDir: string }
  | { backend: 'postgres'; dataDir: string; url: string; schema: string; limits?: PostgresLimits };

/** `[storage]`'s deadlines and pool size (defaults in pg-settings.ts when absent). */
export interface PostgresLimits {
  statementTimeoutMs: number;
  connectTimeoutMs: number;
  poolSize: number;
}

/** The connection to a shared store, as an operator sees it (`/healthz`, `/readyz`). */
export interface StorageConnection {
  /** The pool: `up`, `reconnecting` or `down`, with the newest failure. */
  health(): PgHealth;
  /** The lock session: whether this process holds its writer lock now. */
  locksHeld(): boolean;
  /** Hears when the pool's state changes; returns a function that removes the listener. */
  onHealthChange(listener: (health: PgHealth) => void): () => void;
}

/** An open store and what closes it (the database, then the writer lock). */
export interface OpenedStorage {
  target: StorageTarget;
  dataDir: string;
  db: SqlClient;
  /** On a shared store, which process compacts a channel; none on SQLite (one writer per file). */
  channelLocks?: ChannelLocks;
  /** On a shared store, the connection's state; none on SQLite. */
  connection?: StorageConnection;
  /** PostgreSQL: takes the writer lock of another key too (migrate holds every shard's). */
  lockWriterKey?(key: string): Promise<HeldWriterLock>;
  /**
   * PostgreSQL: hears when the writer lock was lost for good (after a reconnect another process
   * held it). From then on this process must not write: the store refuses writes already.
   */
  onWriterLost?(listener: (key: string) => void): () => void;
  close(): Promise<void>;
}

/** The target `[storage]` names; PostgreSQL needs its URL in the environment variable `url_env` names. */
export function storageTarget(config: Pick<MagpieConfig, 'storage'>, dataDir: string, env: NodeJS.ProcessEnv = process.env): StorageTarget {
  const storage = config.storage;
  if (storage.backend === 'sqlite') return { backend: 'sqlite', dataDir };
  const url = env[storage.urlEnv]?.trim();
  if (!url) {
    throw new InputError(`[storage] backend = "postgres" needs a connection URL in ${storage.urlEnv}, which is not set`, {
      context: { key: 'storage.url_env' },
      hint: `export ${storage.urlEnv}=postgres://user@host:5432/database (or name another variable in [storage] url_env)`,
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

/** Where the data is, for messages and logs (no password). */
export function describeTarget(target: StorageTarget): string {
  return target.backend === 'sqlite' ? target.dataDir : `${redactUrl(target.url)} (schema ${target.schema})`;
}

/**
 * Opens the store for its one writer. SQLite: the data dir's writer lock, then the database.
 * PostgreSQL: the schema is migrated, then an advisory lock per `writerKey` (one per shard) is
 * taken on the writer's connection, so two processes never write the same channels.
 */
export async function openStorageForWriting(
  target: StorageTarget,
  migrations: readonly Migration[],
  options: { command: string; writerKey?: string } & BackgroundCheckpoints,
): Promise<OpenedStorage> {
  if (target.backend === 'sqlite') {
    const writable = await openDataDirForWriting(target.dataDir, migrations, options);
    return { target, dataDir: target.dataDir, db: writable.db, close: () => writable.close() };
  }
  ensureDataDir(target.dataDir);
  const key = options.writerKey ?? 'all';
  const db = await connect(target, options.command);
  // Bound now: a caller may wrap `db.close` to close the whole store.
  const closePool = db.close.bind(db);
  let session: PgSession | undefined;
  try {
    await db.exec(STORAGE_WRITERS_TABLE);
    await applyPgMigrations(db, migrations);
    // Locks live on a connection of their own that reconnects and takes them back.
    session = await PgSession.open({ settings: pgSettings(target, `${options.command.slice(0, 50)} locks`) });
    const opened = session;
    const writer = await takeWriterLock(opened, db, key, options.command);
    const lost = new Set<(key: string) => void>();
    const extra: HeldWriterLock[] = [];
    // While the lock session reconnects, this process does not know whether it still holds the
    // writer lock: writes wait until it has taken its locks back (or heard it lost one).
    let fence: { promise: Promise<void>; release(): void } | undefined;
    opened.onStateChange((state) => {
      if (state === 'reconnecting' || state === 'connecting') {
        if (!fence) {
          let release!: () => void;
          const promise = new Promise<void>((resolve) => (release = resolve));
          fence = { promise, release };
        }
      } else {
        fence?.release();
        fence = undefined;
      }
    });
    db.fenceWrites(() => fence?.promise);
    opened.onLost((lockKey) => {
      if (!lockKey.startsWith('writer:')) return;
      // Another process writes these channels now: this one stops writing at once.
      db.refuseWrites(`the writer lock ${lockKey.slice('writer:'.length)} was taken by another process while the connection was lost`);
      for (const listener of lost) listener(lockKey.slice('writer:'.length));
    });
    return {
      target,
      dataDir: target.dataDir,
      db,
      channelLocks: new SessionChannelLocks(opened),
      connection: {
        health: () => db.health,
        locksHeld: () => opened.state === 'up' && opened.keys.includes(`writer:${key}`),
        onHealthChange: (listener) => db.onHealthChange(listener),
      },
      async lockWriterKey(other: string) {
        const held = await takeWriterLock(opened, db, other, options.command);
        extra.push(held);
        return held;
      },
      onWriterLost(listener) {
        lost.add(listener);
        return () => lost.delete(listener);
      },
      async close() {
        try {
          for (const held of [...extra, writer]) await held.release();
          await opened.close();
        } finally {
          await closePool();
        }
      },
    };
  } catch (error) {
    await session?.close();
    await closePool();
    throw error;
  }
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
  const db = await connect(target, options.command ?? 'magpie reader', { readOnly: true });
  let missing: string[];
  try {
    missing = await missingPgMigrations(db, migrations);
  } catch (error) {
    await db.close();
    throw error;
  }
  if (missing.length === migrations.length || (missing.length > 0 && !options.anyVersion)) {
    await db.close();
    const empty = missing.length === migrations.length;
    const what = `${empty ? `no Magpie data in ${target.dataDir}: ` : ''}no complete Magpie schema in ${describeTarget(target)}`;
    throw new MagpieError(empty ? 'no_data' : 'data_dir_outdated', what, {
      context: { schema: target.schema, missing },
      hint: 'run a writing command (magpie start, chat or replay) against this database first',
    });
  }
  return { target, dataDir: target.dataDir, db, close: () => db.close() };
}

/**
 * Opens the store beside its running writer, to leave it a request (an erasure) in a table the
 * writer reads: no writer lock, no migration (the writer's schema is what it is).
 */
export async function openStorageBesideWriter(target: StorageTarget, command: string): Promise<OpenedStorage> {
  if (target.backend === 'postgres') {
    const db = await connect(target, command);
    return { target, dataDir: target.dataDir, db, close: () => db.close() };
  }
  const connection = new Database(join(target.dataDir, DATABASE_FILE), { fileMustExist: true });
  connection.pragma('busy_timeout = 5000');
  const db = new SerialClient(connection);
  return { target, dataDir: target.dataDir, db, close: () => db.close() };
}

/** The connection settings of `target`, named `applicationName` in `pg_stat_activity`. */
function pgSettings(target: Extract<StorageTarget, { backend: 'postgres' }>, applicationName: string): PgConnectionSettings {
  const limits = target.limits;
  return {
    url: target.url,
    schema: target.schema,
    applicationName: applicationName.slice(0, 60),
    ...(limits ? { statementTimeoutMs: limits.statementTimeoutMs, connectTimeoutMs: limits.connectTimeoutMs, maxConnections: limits.poolSize } : {}),
  };
}

/** A pool on the schema of `target`; a reader's sessions refuse writes on the server. */
function connect(target: Extract<StorageTarget, { backend: 'postgres' }>, command: string, options: { readOnly?: boolean } = {}): Promise<PgPoolClient> {
  return PgPoolClient.connect({ ...pgSettings(target, command), ...(options.readOnly ? { readOnly: true } : {}) });
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
