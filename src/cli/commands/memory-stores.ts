import path from 'node:path';
import { errorMessage, MagpieError } from '../../common/errors.js';
import { EventStream } from '../../common/events.js';
import { loadConfig } from '../../config/load-config.js';
import type { MemorySettings } from '../../config/types.js';
import { openMemoryStore } from '../../memory/open-memory-store.js';
import { openChannelViews } from '../../privacy/channel-views.js';
import type { SqlMemoryStore } from '../../memory/sql-memory-store.js';
import { DATABASE_FILE } from '../../storage/database.js';
import { ALL_MIGRATIONS } from '../../app/migrations.js';
import { describeTarget, listStorage, openStorageForReading, type OpenedStorage, type StorageEntry } from '../../storage/open-storage.js';
import { dataDirOfChannel } from '../../storage/shard-dirs.js';
import { storageError } from '../../storage/storage-error.js';
import type { CliIo } from '../command.js';

/** The memory stores of a deployment's data dirs (one, or one per shard), opened on demand. */
export interface StoreSet {
  /** The store of the shard holding this channel (the only store when unsharded). */
  forChannel(channelId: string): Promise<SqlMemoryStore>;
  /** Every store: the base one or each shard's. */
  all(): Promise<SqlMemoryStore[]>;
}

/**
 * Opens the data directory's databases and memory stores around `work` as it asks for them
 * (the data dir itself, or the `shard-<N>` dirs of a sharded bot), and closes them all. A data
 * directory without a database is an error: reading commands never create an empty one. They
 * open read-only, so they work beside a running bot and on a read-only disk. (`memory forget`
 * writes, through the app and its writer lock.)
 */
export async function withStores(
  values: { 'data-dir'?: string | undefined; config?: string | undefined },
  io: CliIo,
  work: (stores: StoreSet) => Promise<number>,
): Promise<number> {
  const { config } = loadConfig({ path: values.config, cwd: io.cwd, env: io.env });
  const dataDir = path.resolve(io.cwd, values['data-dir'] ?? config.memory.dataDir);
  const dirs = listStorage(config, dataDir, io.env);
  if (dirs.length === 0) {
    throw new MagpieError('no_data', `no Magpie data in ${dataDir} (${DATABASE_FILE} not found)`, {
      hint: 'pass --data-dir with a directory written by `magpie start`, `magpie chat` or `magpie replay`',
    });
  }
  // A damaged index file is never trusted; say so, since a reader rebuilds it in memory each run.
  const events = new EventStream();
  events.subscribe((event) => {
    if (event.type === 'memory_index_rebuild' && event.reason !== 'no saved index' && event.reason !== 'index file missing') {
      io.stderr.write(`warning: the vector index of ${String(event.index_key)} was not used (${String(event.reason)}); searching without it\n`);
    } else if (event.type === 'memory_index_path_moved') {
      io.stderr.write(`warning: ${String(event.path)} is ${String(event.reason)}; ${event.moved_to ? `moved to ${String(event.moved_to)}` : 'ignored'}\n`);
    }
  });
  const opened = new Map<string, { storage?: OpenedStorage; store?: SqlMemoryStore }>();
  const open = async (entry: StorageEntry): Promise<SqlMemoryStore> => {
    const existing = opened.get(entry.dir);
    if (existing?.store) return existing.store;
    const slot: { storage?: OpenedStorage; store?: SqlMemoryStore } = {};
    opened.set(entry.dir, slot);
    try {
      slot.storage = await openStorageForReading(entry.target, ALL_MIGRATIONS, { command: 'magpie memory' });
      const settings: MemorySettings = { ...config.memory, dataDir: entry.dir };
      const views = await openChannelViews(slot.storage.db);
      slot.store = await openMemoryStore({ db: slot.storage.db, dataDir: entry.dir, settings, env: io.env, events, readOnly: true, ...(views ? { views } : {}) });
      return slot.store;
    } catch (error) {
      throw storageError(describeTarget(entry.target), error) ?? error;
    }
  };
  const byChannel = (channelId: string): StorageEntry => {
    if (dirs.length === 1) return dirs[0]!;
    const found = dataDirOfChannel(dataDir, channelId);
    return dirs.find((entry) => entry.dir === found?.dir) ?? dirs[0]!;
  };
  const stores: StoreSet = {
    forChannel: (channelId) => open(byChannel(channelId)),
    all: async () => {
      const all: SqlMemoryStore[] = [];
      for (const entry of dirs) all.push(await open(entry));
      return all;
    },
  };
  try {
    return await work(stores);
  } catch (error) {
    throw storageError(dataDir, error) ?? error;
  } finally {
    for (const slot of opened.values()) {
      try {
        await slot.store?.close();
      } catch (error) {
        io.stderr.write(`magpie memory: could not save the vector index: ${errorMessage(error)}\n`);
      }
      await slot.storage?.close();
    }
  }
}
