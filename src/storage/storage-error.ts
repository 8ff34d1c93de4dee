import { errorMessage, MagpieError } from '../common/errors.js';
import { PgError } from './postgres/pg-error.js';

/** What went wrong with the disk or the database, as far as an operator needs to know. */
export type StorageProblemKind = 'full' | 'io' | 'busy' | 'read_only' | 'corrupt' | 'connection';

const SQLITE_KINDS: ReadonlyArray<[RegExp, StorageProblemKind]> = [
  [/^SQLITE_FULL/, 'full'],
  [/^SQLITE_IOERR/, 'io'],
  [/^SQLITE_(BUSY|LOCKED)/, 'busy'],
  [/^SQLITE_READONLY/, 'read_only'],
  [/^SQLITE_(CORRUPT|NOTADB)/, 'corrupt'],
];

const ERRNO_KINDS: Readonly<Record<string, StorageProblemKind>> = {
  ENOSPC: 'full',
  EDQUOT: 'full',
  EIO: 'io',
  EROFS: 'read_only',
};

/** PostgreSQL SQLSTATEs (and the socket errors of a dropped connection) an operator can act on. */
const POSTGRES_KINDS: ReadonlyArray<[RegExp, StorageProblemKind]> = [
  [/^53100$/, 'full'],
  [/^(58030|58000)$/, 'io'],
  // Serialization failure, deadlock, lock timeout, statement timeout, a server short of memory or connections.
  [/^(40001|40P01|55P03|57014|53200|53300|53400)$/, 'busy'],
  [/^(25006|42501)$/, 'read_only'],
  [/^XX00[12]$/, 'corrupt'],
  [/^(08...|57P0[123]|ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$/, 'connection'],
];

/** The kind of storage failure `error` is (SQLite result codes, PostgreSQL SQLSTATEs, file system errno), if it is one. */
export function storageProblemKind(error: unknown): StorageProblemKind | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (error instanceof MagpieError) return error.code === 'postgres_connection_lost' ? 'connection' : undefined;
  if (error instanceof PgError) {
    if (typeof code === 'string') for (const [pattern, kind] of POSTGRES_KINDS) if (pattern.test(code)) return kind;
    return undefined;
  }
  if (typeof code !== 'string') return undefined;
  for (const [pattern, kind] of SQLITE_KINDS) if (pattern.test(code)) return kind;
  return ERRNO_KINDS[code];
}

interface Description {
  what: string;
  hint: string;
}

const SQLITE_DESCRIPTIONS: Readonly<Record<Exclude<StorageProblemKind, 'connection'>, Description>> = {
  full: {
    what: 'is out of space',
    hint: 'free space on the disk that holds it (or move the data dir to a larger disk) and run again; everything stored before is kept',
  },
  io: {
    what: 'had an I/O error',
    hint: 'check the disk that holds it (kernel log, SMART, fsck) and run again; everything stored before is kept',
  },
  busy: {
    what: 'stayed locked by another process',
    hint: 'make sure only one Magpie process writes this data dir (readers may run beside it), then run again',
  },
  read_only: {
    what: 'is read-only',
    hint: 'remount the disk read-write or give this user write access; read-only commands (magpie memory search) still work',
  },
  corrupt: {
    what: 'holds a damaged database',
    hint: 'stop Magpie, keep a copy of the data dir, and restore magpie.sqlite from a backup (sqlite3 .recover can salvage rows)',
  },
};

const POSTGRES_DESCRIPTIONS: Readonly<Record<StorageProblemKind, Description>> = {
  full: {
    what: 'is out of disk space',
    hint: 'free space on the PostgreSQL server (or grow its volume) and run again; everything committed before is kept',
  },
  io: {
    what: 'had an I/O error on its server',
    hint: "check the PostgreSQL server's disk and log, then run again; everything committed before is kept",
  },
  busy: {
    what: 'is overloaded or held a lock too long',
    hint: 'check the server (pg_stat_activity: long transactions, connection count) and run again',
  },
  read_only: {
    what: 'refuses writes',
    hint: "connect to the primary (not a standby) with a role that may write Magpie's schema; readers (magpie memory search) still work",
  },
  corrupt: {
    what: 'reports damaged data',
    hint: 'stop Magpie, and restore the database from a backup (or REINDEX a damaged index) before running again',
  },
  connection: {
    what: 'dropped the connection',
    hint: 'check that the server is up and reachable, then restart Magpie: nothing half-written was kept, every committed write is',
  },
};

/**
 * A clear error for a storage failure that names the data dir (or PostgreSQL) and what to do,
 * or undefined when `error` is not a storage failure. Full disks, I/O errors and a busy database
 * are retryable (the bot retries them with backoff); a damaged or read-only database is not.
 * `PgPoolClient` classes a lost connection or a passed deadline itself (`storage_connection`,
 * `storage_timeout`, both retryable: it opens a new connection), and those pass through.
 */
export function storageError(dataDir: string, error: unknown): MagpieError | undefined {
  if (error instanceof MagpieError && error.code.startsWith('storage_')) return error;
  const kind = storageProblemKind(error);
  if (!kind) return undefined;
  const code = (error as { code: string }).code;
  const postgres = error instanceof PgError || kind === 'connection';
  const { what, hint } = postgres ? POSTGRES_DESCRIPTIONS[kind] : SQLITE_DESCRIPTIONS[kind as Exclude<StorageProblemKind, 'connection'>];
  const subject = postgres ? 'the PostgreSQL database' : `the data directory ${dataDir}`;
  return new MagpieError(`storage_${kind}`, `${subject} ${what} (${code}: ${errorMessage(error)})`, {
    cause: error,
    retryable: kind === 'full' || kind === 'io' || kind === 'busy',
    context: { dataDir, code, backend: postgres ? 'postgres' : 'sqlite' },
    hint,
  });
}
