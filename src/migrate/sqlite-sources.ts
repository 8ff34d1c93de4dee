import type Database from 'better-sqlite3';
import { MagpieError } from '../common/errors.js';
import { DATABASE_FILE, type Migration } from '../storage/database.js';
import { openDataDirForWriting, type WritableDataDir } from '../storage/data-dir.js';
import { SerialClient } from '../storage/serial-client.js';
import { listDataDirs } from '../storage/shard-dirs.js';
import { storageError } from '../storage/storage-error.js';

/** One SQLite database being copied: the data dir itself or one of its `shard-<N>` dirs. */
export interface SqliteSource {
  dir: string;
  shardId?: number;
  /** better-sqlite3 itself: the copy reads raw rows with exact 64-bit integers. */
  db: Database.Database;
}

/** Every source of a data dir, each held under its writer lock until `close`. */
export interface OpenedSources {
  sources: SqliteSource[];
  close(): Promise<void>;
}

/**
 * Opens the data dir (and every shard dir under it) as its one writer: no bot, chat or replay
 * can write it while the copy runs, so what is copied is what is verified. A database written
 * by an older Magpie is brought up to date first, as any writer would.
 */
export async function openSources(dataDir: string, migrations: readonly Migration[]): Promise<OpenedSources> {
  const entries = listDataDirs(dataDir);
  if (entries.length === 0) {
    throw new MagpieError('no_data', `no Magpie data in ${dataDir} (${DATABASE_FILE} not found, nor shard-<N>/${DATABASE_FILE})`, {
      context: { dataDir },
      hint: 'pass --data-dir with a directory written by `magpie start`, `magpie chat` or `magpie replay`',
    });
  }
  const opened: WritableDataDir[] = [];
  const close = async (): Promise<void> => {
    for (const writable of opened.reverse()) await writable.close();
  };
  try {
    for (const entry of entries) {
      try {
        opened.push(await openDataDirForWriting(entry.dir, migrations, { command: 'magpie migrate' }));
      } catch (error) {
        throw storageError(entry.dir, error) ?? error;
      }
    }
  } catch (error) {
    await close();
    throw error;
  }
  const sources = entries.map((entry, index) => ({
    dir: entry.dir,
    ...(entry.shardId === undefined ? {} : { shardId: entry.shardId }),
    db: rawConnection(opened[index]!),
  }));
  return { sources, close };
}

/** The better-sqlite3 connection under a writable data dir's client (always SQLite here). */
function rawConnection(writable: WritableDataDir): Database.Database {
  if (!(writable.db instanceof SerialClient)) throw new Error(`${writable.dataDir} is not opened on SQLite`);
  return writable.db.connection as unknown as Database.Database;
}

/** A source's name in messages: `shard-3` or the directory. */
export function sourceName(source: SqliteSource): string {
  return source.shardId === undefined ? source.dir : `shard-${source.shardId} (${source.dir})`;
}

/**
 * The tables holding Magpie data: everything but SQLite's own, the migration record, and FTS5
 * tables with their shadow tables (derived: PostgreSQL computes its own full-text column).
 */
export function sourceTables(db: Database.Database): string[] {
  const rows = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name`).all() as Array<{ name: string; sql: string | null }>;
  const virtual = rows.filter((row) => /^\s*CREATE\s+VIRTUAL\s+TABLE/i.test(row.sql ?? '')).map((row) => row.name);
  return rows
    .map((row) => row.name)
    .filter((name) => !name.startsWith('sqlite_') && name !== 'schema_migrations')
    .filter((name) => !virtual.some((table) => name === table || name.startsWith(`${table}_`)));
}

export function sourceColumns(db: Database.Database, table: string): string[] {
  return (db.prepare(`SELECT name FROM pragma_table_info(?)`).all(table) as Array<{ name: string }>).map((row) => row.name);
}

/**
 * The highest id a table's identity column has handed out: the largest stored, or what
 * AUTOINCREMENT remembers of deleted rows above it (`sqlite_sequence`), since an id must never
 * be given twice (a vector's `seq` is how index files know what they hold).
 */
export function highestId(db: Database.Database, table: string, column: string): bigint {
  const stored = db.prepare(`SELECT max("${column}") FROM "${table}"`).pluck().get() as number | bigint | null;
  let top = BigInt(stored ?? 0);
  const hasSequence = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'`).get() !== undefined;
  if (hasSequence) {
    const remembered = db.prepare('SELECT seq FROM sqlite_sequence WHERE name = ?').pluck().get(table) as number | bigint | undefined;
    if (remembered !== undefined && BigInt(remembered) > top) top = BigInt(remembered);
  }
  return top;
}

/** The channels a source holds history or memories of. */
export function sourceChannels(db: Database.Database): Set<string> {
  const rows = db
    .prepare('SELECT channel_id FROM history_channels UNION SELECT DISTINCT channel_id FROM memory_items')
    .pluck()
    .all() as string[];
  return new Set(rows);
}

/**
 * Shards own disjoint channels; a channel in two shard dirs (the shard count changed once)
 * cannot be merged into one store without choosing whose history wins, so it is refused.
 */
export function checkDisjointChannels(sources: readonly SqliteSource[]): void {
  if (sources.length < 2) return;
  const owner = new Map<string, SqliteSource>();
  for (const source of sources) {
    for (const channel of sourceChannels(source.db)) {
      const first = owner.get(channel);
      if (first) {
        throw new MagpieError('channel_in_two_shards', `channel ${channel} has data in both ${sourceName(first)} and ${sourceName(source)}`, {
          context: { channelId: channel, dirs: [first.dir, source.dir] },
          hint: 'merge by hand is not supported: migrate each shard dir on its own (--data-dir DIR/shard-<N>) into a schema of its own (--schema)',
        });
      }
      owner.set(channel, source);
    }
  }
}
