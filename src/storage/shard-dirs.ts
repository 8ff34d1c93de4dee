import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { DATABASE_FILE } from './database.js';

/**
 * Where sharded processes keep their data: with SQLite, shard N of a deployment writes
 * `<data_dir>/shard-<N>/` (its own database, archive and vector indexes), since a channel
 * belongs to exactly one shard. Readers (`magpie memory`, `magpie status`) look across them.
 */
export const SHARD_DIR_PREFIX = 'shard-';

/** The data directory shard `shardId` writes. */
export function shardDataDir(dataDir: string, shardId: number): string {
  return path.join(dataDir, `${SHARD_DIR_PREFIX}${shardId}`);
}

export interface DataDirEntry {
  dir: string;
  /** Undefined for the base directory itself (an unsharded run). */
  shardId?: number;
}

/**
 * Every directory of a deployment that holds a database: the base one (an unsharded run) first,
 * then `shard-<N>` ones by shard id. Empty when there is no data at all.
 */
export function listDataDirs(dataDir: string): DataDirEntry[] {
  const found: DataDirEntry[] = [];
  if (existsSync(path.join(dataDir, DATABASE_FILE))) found.push({ dir: dataDir });
  let names: string[] = [];
  try {
    names = readdirSync(dataDir);
  } catch {
    return found;
  }
  const shards = names
    .map((name) => ({ name, match: /^shard-(\d+)$/.exec(name) }))
    .filter((entry) => entry.match !== null && existsSync(path.join(dataDir, entry.name, DATABASE_FILE)))
    .map((entry) => ({ dir: path.join(dataDir, entry.name), shardId: Number(entry.match![1]) }))
    .sort((left, right) => left.shardId - right.shardId);
  return [...found, ...shards];
}

/** True when the data dir was written by shards (it has `shard-<N>` databases). */
export function isSharded(dataDir: string): boolean {
  return listDataDirs(dataDir).some((entry) => entry.shardId !== undefined);
}

/**
 * The directory among `listDataDirs(dataDir)` that holds the channel's history or memory, read
 * without writing anything; undefined when none does.
 */
export function dataDirOfChannel(dataDir: string, channelId: string): DataDirEntry | undefined {
  for (const entry of listDataDirs(dataDir)) {
    const db = new Database(path.join(entry.dir, DATABASE_FILE), { readonly: true, fileMustExist: true });
    try {
      const known = db
        .prepare(
          `SELECT 1 FROM memory_items WHERE channel_id = ? UNION ALL SELECT 1 FROM history_entries WHERE channel_id = ? LIMIT 1`,
        )
        .get(channelId, channelId);
      if (known) return entry;
    } catch {
      // An old or foreign database without these tables knows no channel.
    } finally {
      db.close();
    }
  }
  return undefined;
}
