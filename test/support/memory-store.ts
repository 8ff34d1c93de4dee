/** A real memory store on a real SQLite file in a temp dir, for the memory tests. */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEFAULTS } from '../../src/config/defaults.js';
import type { MemoryScope } from '../../src/config/types.js';
import { openMemoryStore, type SqlMemoryStore, type TranscriptEntryInput } from '../../src/memory/index.js';
import type { SqlClient } from '../../src/storage/sql-client.js';
import { openChannelViews } from '../../src/privacy/channel-views.js';
import { openTestDatabase } from './storage.js';

/**
 * A conversation as transcript rows: `[author, text]` lines a minute apart in one channel, the
 * author's id their lower-cased name, the message ids `idOf(index)`.
 */
export function conversation(
  channelId: string,
  lines: ReadonlyArray<readonly [string, string]>,
  idOf: (index: number) => string = (index) => `m${index}`,
): TranscriptEntryInput[] {
  return lines.map(([authorName, content], index) => ({
    channelId,
    messageId: idOf(index),
    authorId: authorName.toLowerCase(),
    authorName,
    content,
    createdAt: 1_700_000_000_000 + index * 60_000,
  }));
}

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
