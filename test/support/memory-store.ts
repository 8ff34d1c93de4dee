/** A real memory store on a real SQLite file in a temp dir, for the memory tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULTS } from '../../src/config/defaults.js';
import type { MemoryScope } from '../../src/config/types.js';
import { openMemoryStore, type SqlMemoryStore } from '../../src/memory/index.js';
import type { SqlClient } from '../../src/storage/sql-client.js';
import { openChannelViews } from '../../src/privacy/channel-views.js';
import { openTestDatabase } from './storage.js';

export interface OpenedStore {
  dir: string;
  db: SqlClient;
  store: SqlMemoryStore;
  /** Closes store and database (if still open) and removes the directory. */
  close(): Promise<void>;
}

export async function openTestStore(options: { scope?: MemoryScope; dir?: string } = {}): Promise<OpenedStore> {
  const dir = options.dir ?? mkdtempSync(path.join(os.tmpdir(), 'magpie-'));
  const db = await openTestDatabase(dir);
  const views = await openChannelViews(db);
  const store = await openMemoryStore({ db, dataDir: dir, settings: { ...DEFAULTS.memory, scope: options.scope ?? 'channel' }, ...(views ? { views } : {}) });
  return {
    dir,
    db,
    store,
    async close() {
      await store.close();
      if (db.open) await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
