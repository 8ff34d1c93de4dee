import { join } from 'node:path';
import type { Clock } from '../common/clock.js';
import type { EventStream } from '../common/events.js';
import { InputError, MagpieError } from '../common/errors.js';
import type { MemorySettings } from '../config/types.js';
import type { SqlClient } from '../storage/sql-client.js';
import { embedderIdentity, vectorToBlob, type Embedder } from './embedder.js';
import { HashingEmbedder } from './hashing-embedder.js';
import { HttpEmbedder } from './http-embedder.js';
import { DEFAULT_SEARCH_TUNING, type SearchTuning } from './hybrid-search.js';
import { VectorIndexManager, type IndexProgress } from './index-manager.js';
import { SqlMemoryStore } from './sql-memory-store.js';
import type { ViewRegistry } from './types.js';
import { DEFAULT_HNSW_PARAMS, type HnswParams } from './vector-index.js';

export interface OpenMemoryStoreOptions {
  /** From `openDatabase(dataDir, ALL_MIGRATIONS)`; the caller owns it and closes it. */
  db: SqlClient;
  dataDir: string;
  settings: MemorySettings;
  env?: NodeJS.ProcessEnv;
  clock?: Clock;
  /**
   * The view keys of guild channels (`openChannelViews` in privacy), which the guild scope checks
   * and `recordChannelView` writes. Without them the guild scope shares by guild alone and views
   * are not recorded.
   */
  views?: ViewRegistry;
  /** Overrides the embedder the settings name (tests, benchmarks). */
  embedder?: Embedder;
  hnsw?: Partial<HnswParams>;
  tuning?: Partial<SearchTuning>;
  /** Index load and rebuild events go here. */
  events?: EventStream;
  /** Progress of index rebuilds and catch-ups (the CLI draws it on a terminal). */
  onIndexProgress?: (progress: IndexProgress) => void;
  /** Indexes kept loaded at once (least recently used beyond it are saved and dropped). */
  maxLoadedIndexes?: number;
  /** An index unused this long is saved and dropped (default 10 minutes). */
  idleIndexMs?: number;
  /** How long staged transcript rows wait for company before their vectors are made (default 10 ms). */
  vectorDelayMs?: number;
  /**
   * A reader (the database was opened read-only): nothing is written, indexes that cannot be
   * trusted are rebuilt in memory only, and an embedder change is refused instead of re-embedding.
   */
  readOnly?: boolean;
}

/** The embedder `[memory]` asks for. */
export function createEmbedder(settings: MemorySettings, options: { env?: NodeJS.ProcessEnv } = {}): Embedder {
  if (settings.embedder === 'http') return new HttpEmbedder({ settings: settings.http, ...(options.env ? { env: options.env } : {}) });
  if (settings.embedder === 'hash') return new HashingEmbedder({ dimension: settings.hashDimension, offThread: true });
  throw new InputError(`memory.embedder must be "hash" or "http"; got ${JSON.stringify(settings.embedder)}`);
}

/**
 * Opens the memory store of a data directory. When the embedder differs from the one the stored
 * vectors were made with (name, model or dimension), every vector is recomputed from the text in
 * SQLite before the store is handed out, and every index file is dropped.
 */
export async function openMemoryStore(options: OpenMemoryStoreOptions): Promise<SqlMemoryStore> {
  const embedder = options.embedder ?? createEmbedder(options.settings, options.env ? { env: options.env } : {});
  const params: HnswParams = { ...DEFAULT_HNSW_PARAMS, ...options.hnsw };
  const identity = embedderIdentity(embedder);
  const indexes = new VectorIndexManager({
    db: options.db,
    directory: join(options.dataDir, 'index'),
    dimension: embedder.dimension,
    embedderIdentity: identity,
    params,
    ...(options.maxLoadedIndexes ? { maxLoaded: options.maxLoadedIndexes } : {}),
    ...(options.idleIndexMs !== undefined ? { idleMs: options.idleIndexMs } : {}),
    ...(options.events ? { events: options.events } : {}),
    ...(options.onIndexProgress ? { onIndexProgress: options.onIndexProgress } : {}),
    ...(options.readOnly ? { readOnly: true } : {}),
  });
  const stored = (await options.db.prepare(`SELECT value FROM memory_meta WHERE key = 'embedder'`).get()) as { value: string } | undefined;
  if (stored?.value !== identity && options.readOnly) {
    throw new MagpieError('embedder_changed', `the vectors in ${options.dataDir} were made with ${stored?.value ?? 'no embedder'}, the config asks for ${identity}`, {
      context: { dataDir: options.dataDir },
      hint: 'read with the config the data dir was written with, or run a writing command (magpie start, replay) once to re-embed',
    });
  }
  if (stored?.value !== identity) {
    const items = await reembedAll(options.db, embedder);
    if (stored) options.events?.emit({ type: 'memory_vectors_rebuilt', from: stored.value, to: identity, items });
    await indexes.dropAll();
    await options.db
      .prepare(`INSERT INTO memory_meta (key, value) VALUES ('embedder', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`)
      .run(identity);
  }
  const views = options.views;
  const store = new SqlMemoryStore({
    db: options.db,
    ...(views ? { views } : {}),
    embedder,
    indexes,
    scope: options.settings.scope,
    tuning: { ...DEFAULT_SEARCH_TUNING, ...embedderTuning(embedder), ...options.tuning },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.events ? { events: options.events } : {}),
    ...(options.vectorDelayMs !== undefined ? { vectorDelayMs: options.vectorDelayMs } : {}),
    ...(options.readOnly ? { readOnly: true } : {}),
  });
  // Vectors owed, and text stored while the embedder was down (before a restart), are made in the background.
  await store.resumeBackgroundWork();
  return store;
}

/**
 * How much the vector list counts in the fusion, and whether the best full-text hits move the
 * query vector first. Measured on LoCoMo (evidence recall): the hashed bag of words and trigrams
 * only adds noise when ranked as an equal of BM25 (recall@5 0.65 with weight 1, 0.73 with 0.1),
 * so it mostly breaks ties and fills in when no word matches; moved towards the three best
 * full-text hits it finds more (recall@5 0.866 to 0.876). A real embedding model behind the HTTP
 * embedder gets an equal vote and its own query vector, as feedback was not measured there.
 */
function embedderTuning(embedder: Embedder): Pick<SearchTuning, 'vectorWeight' | 'feedbackWeight'> {
  return embedder instanceof HashingEmbedder ? { vectorWeight: 0.1, feedbackWeight: 0.5 } : { vectorWeight: 1, feedbackWeight: 0 };
}

/** Recomputes every vector from SQLite content (the source of truth), in batches. */
async function reembedAll(db: SqlClient, embedder: Embedder): Promise<number> {
  const select = db.prepare('SELECT rowid, content, index_key FROM memory_items WHERE rowid > ? ORDER BY rowid LIMIT 512');
  const insert = db.prepare('INSERT INTO memory_vectors (item_rowid, index_key, vector) VALUES (?, ?, ?)');
  const replaced: Array<{ rowid: number; indexKey: string; vector: Float32Array }> = [];
  let after = 0;
  for (;;) {
    const rows = (await select.all(after)) as Array<{ rowid: number; content: string; index_key: string }>;
    if (rows.length === 0) break;
    const vectors = await embedder.embed(rows.map((row) => row.content));
    rows.forEach((row, position) => replaced.push({ rowid: row.rowid, indexKey: row.index_key, vector: vectors[position]! }));
    after = rows[rows.length - 1]!.rowid;
  }
  // Swapped in one transaction: a failure part way leaves the old vectors and identity intact.
  await db.transaction(async () => {
    await db.exec('DELETE FROM memory_vectors');
    for (const item of replaced) await insert.run(item.rowid, item.indexKey, vectorToBlob(item.vector));
  });
  return replaced.length;
}
