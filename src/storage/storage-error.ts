import { errorMessage, MagpieError } from '../common/errors.js';

/** What went wrong with the disk or the database, as far as an operator needs to know. */
export type StorageProblemKind = 'full' | 'io' | 'busy' | 'read_only' | 'corrupt';

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

/** The kind of storage failure `error` is (SQLite result codes, file system errno), if it is one. */
export function storageProblemKind(error: unknown): StorageProblemKind | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  for (const [pattern, kind] of SQLITE_KINDS) if (pattern.test(code)) return kind;
  return ERRNO_KINDS[code];
}

const DESCRIPTIONS: Readonly<Record<StorageProblemKind, { what: string; hint: string }>> = {
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

/**
 * A clear, retry-aware error for a storage failure that names the data dir and what to do, or
 * undefined when `error` is not a storage failure. Full disks, I/O errors and a busy database are
 * retryable (the bot retries them with backoff); a damaged or read-only database is not.
 */
export function storageError(dataDir: string, error: unknown): MagpieError | undefined {
  if (error instanceof MagpieError && error.code.startsWith('storage_')) return error;
  const kind = storageProblemKind(error);
  if (!kind) return undefined;
  const { what, hint } = DESCRIPTIONS[kind];
  const code = (error as { code: string }).code;
  return new MagpieError(`storage_${kind}`, `the data directory ${dataDir} ${what} (${code}: ${errorMessage(error)})`, {
    cause: error,
    retryable: kind === 'full' || kind === 'io' || kind === 'busy',
    context: { dataDir, code },
    hint,
  });
}
