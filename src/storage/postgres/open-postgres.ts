import { MagpieError } from '../../common/errors.js';
import type { Migration, SchemaStepListener } from '../database.js';
import { describeTarget, type OpenedStorage, type StorageTarget } from '../storage-target.js';
import { applyPgMigrations, missingPgMigrations } from './pg-migrations.js';
import { PgPoolClient } from './pg-pool-client.js';
import { PgSession } from './pg-session.js';
import { SessionChannelLocks, STORAGE_WRITERS_TABLE, takeWriterLock } from './pg-session-locks.js';
import type { PgConnectionSettings } from './pg-settings.js';
import { WriteFence } from './pg-write-fence.js';

type PostgresTarget = Extract<StorageTarget, { backend: 'postgres' }>;

/**
 * Opens a PostgreSQL store for its writer (`openStorageForWriting`): the schema is migrated,
 * then an advisory lock per `writerKey` (one per shard) is taken on a lock session of its own.
 */
export async function openPostgresForWriting(
  target: PostgresTarget,
  migrations: readonly Migration[],
  options: { command: string; writerKey?: string; onSchemaStep?: SchemaStepListener },
): Promise<OpenedStorage> {
  const key = options.writerKey ?? 'all';
  const db = await connectPostgres(target, options.command);
  // Bound now: a caller may wrap `db.close` to close the whole store.
  const closePool = db.close.bind(db);
  let session: PgSession | undefined;
  try {
    await db.exec(STORAGE_WRITERS_TABLE);
    await applyPgMigrations(db, migrations, options.onSchemaStep);
    // Locks live on a connection of their own that reconnects and takes them back.
    session = await PgSession.open({ settings: pgSettings(target, `${options.command.slice(0, 50)} locks`) });
    const opened = session;
    await takeWriterLock(opened, db, key, options.command);
    const lost = new Set<(key: string) => void>();
    // While the lock session reconnects, this process does not know whether it still holds the
    // writer lock: writes wait until it has taken its locks back (or heard it lost one).
    const fence = new WriteFence(target.schema);
    let closing = false;
    opened.onStateChange((state) => {
      if (state === 'up') fence.lower();
      else fence.raise();
      // Closing: a session that went away is not waited for (its locks are about to be released).
      if (closing && state === 'reconnecting') void opened.close();
    });
    db.fenceWrites(() => fence.current());
    opened.onLost((lockKey) => {
      if (!lockKey.startsWith('writer:')) return;
      // Another process writes these channels now: this one stops writing at once.
      db.refuseWrites(`the writer lock ${lockKey.slice('writer:'.length)} was taken by another process while the connection was lost`);
      for (const listener of lost) listener(lockKey.slice('writer:'.length));
    });
    const beginClose = (): void => {
      if (closing) return;
      closing = true;
      fence.refuse('the store is closing, and the writer lock cannot be confirmed while the lock session is away');
      // No reconnect loop outlives the decision to stop: the server dropped the locks with the connection.
      if (opened.state !== 'up') void opened.close();
    };
    return {
      target,
      dataDir: target.dataDir,
      db,
      channelLocks: new SessionChannelLocks(opened),
      connection: {
        health: () => db.health,
        locksHeld: () => opened.state === 'up' && opened.keys.includes(`writer:${key}`),
        onHealthChange: (listener) => db.onHealthChange(listener),
        onLockSessionChange: (listener) =>
          opened.onStateChange((state, error) => {
            if (state === 'up') listener('up', undefined);
            else if (state === 'reconnecting') listener('reconnecting', error instanceof Error ? error.message : error === undefined ? undefined : String(error));
          }),
        beginClose,
      },
      lockWriterKey: (other: string) => takeWriterLock(opened, db, other, options.command),
      onWriterLost(listener) {
        lost.add(listener);
        return () => lost.delete(listener);
      },
      async close() {
        beginClose();
        try {
          // Ending the session releases every lock it holds (server side): no unlock round trip
          // per key that a connection gone silent would make the shutdown wait for.
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

/** Opens a PostgreSQL store beside its writer (`openStorageForReading`): read-only sessions, no migration. */
export async function openPostgresForReading(
  target: PostgresTarget,
  migrations: readonly Migration[],
  options: { command?: string; anyVersion?: boolean },
): Promise<OpenedStorage> {
  const db = await connectPostgres(target, options.command ?? 'magpie reader', { readOnly: true });
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
    // The data dir holds only index files on PostgreSQL: the schema is what is missing.
    const what = `${empty ? 'no Magpie data: ' : ''}no complete Magpie schema in ${describeTarget(target)}`;
    throw new MagpieError(empty ? 'no_data' : 'data_dir_outdated', what, {
      context: { schema: target.schema, missing },
      hint: 'run a writing command (magpie start, chat or replay) against this database first',
    });
  }
  return { target, dataDir: target.dataDir, db, close: () => db.close() };
}

/** The connection settings of `target`, named `applicationName` in `pg_stat_activity`. */
function pgSettings(target: PostgresTarget, applicationName: string): PgConnectionSettings {
  const limits = target.limits;
  return {
    url: target.url,
    schema: target.schema,
    applicationName: applicationName.slice(0, 60),
    ...(limits ? { statementTimeoutMs: limits.statementTimeoutMs, connectTimeoutMs: limits.connectTimeoutMs, maxConnections: limits.poolSize } : {}),
  };
}

/** A pool on the schema of `target`; a reader's sessions refuse writes on the server. */
export function connectPostgres(target: PostgresTarget, command: string, options: { readOnly?: boolean } = {}): Promise<PgPoolClient> {
  return PgPoolClient.connect({ ...pgSettings(target, command), ...(options.readOnly ? { readOnly: true } : {}) });
}
