/**
 * PostgreSQL for benchmarks: whether one answers, a fresh schema per measurement (dropped after),
 * and the raw insert rate of ingest's rows with no Magpie code in between, as the SQLite floor
 * measures it.
 */
import { DEFAULTS } from '../src/config/defaults.js';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { StorageSettings } from '../src/config/types.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { openStorageForWriting } from '../src/storage/open-storage.js';
import { redactUrl } from '../src/storage/postgres/pg-error.js';
import { floorRow } from './floor-rows.js';

const DEFAULT_STORAGE = DEFAULTS.storage;

const URL_ENV = 'MAGPIE_DATABASE_URL';

export interface BenchPostgres {
  /** Where it is (no password). */
  describe: string;
  /** Runs `work` on a schema of its own, then drops the schema whatever happened. */
  withSchema<T>(work: (storage: StorageSettings, env: NodeJS.ProcessEnv) => Promise<T>): Promise<T>;
}

/** The PostgreSQL benchmarks use, or undefined when none answers within a few seconds. */
export async function postgresForBench(env: NodeJS.ProcessEnv = process.env): Promise<BenchPostgres | undefined> {
  const url = env.MAGPIE_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  try {
    await probe.connect();
    await probe.query('SELECT 1');
  } catch {
    return undefined;
  } finally {
    await probe.end().catch(() => undefined);
  }
  return {
    describe: redactUrl(url),
    async withSchema(work) {
      const schema = `bench_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
      try {
        return await work({ ...DEFAULT_STORAGE, backend: 'postgres', urlEnv: URL_ENV, schema }, { [URL_ENV]: url });
      } finally {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        } finally {
          await client.end();
        }
      }
    },
  };
}

/**
 * Ingest's rows (history row, transcript row with its search text under GIN, vector backlog row)
 * inserted into a freshly migrated schema by one connection, `batch` messages per transaction,
 * each table's rows of a batch in one multi-row statement: the most this server takes.
 */
export async function measurePostgresInsertRate(options: {
  storage: StorageSettings;
  env: NodeJS.ProcessEnv;
  rows: number;
  channels: number;
  batch: number;
  /** Messages already archived before the clock starts (their vectors done): a store in use. */
  archived?: number;
}): Promise<number> {
  const url = options.env[options.storage.urlEnv]!;
  // Index files would live in the data dir; none are written here.
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-bench-pg-raw-'));
  try {
    await (await openStorageForWriting({ backend: 'postgres', dataDir, url, schema: options.storage.schema }, ALL_MIGRATIONS, { command: 'magpie bench' })).close();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`SET search_path TO ${options.storage.schema}`);
    // Built before the clock starts, search text included: tokenizing is Magpie's work, which the
    // gateway path pays for on its own; the floor is what the server takes for the same rows.
    const batchOf = (first: number, last: number) => {
      const rows = Array.from({ length: last - first }, (_, offset) => floorRow(first + offset, options.channels));
      return {
        channels: rows.map((row) => row.channel),
        seqs: rows.map((row) => row.seq),
        ids: rows.map((row) => row.messageId),
        texts: rows.map((row) => row.text),
        searchTexts: rows.map((row) => row.searchText),
        hashes: rows.map((row) => row.hash),
        tags: rows.map((row) => row.tags),
        turns: rows.map((row) => row.turn),
      };
    };
    const batches = (from: number, to: number, size: number) => {
      const made = [];
      for (let first = from; first < to; first += size) made.push(batchOf(first, Math.min(to, first + size)));
      return made;
    };
    const insert = async ({ channels, seqs, ids, texts, searchTexts, hashes, tags, turns }: ReturnType<typeof batchOf>, owesVector: boolean) => {
      const now = Date.now();
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO history_entries (channel_id, seq, message_id, kind, role, author_id, author_name, content, created_at, tokens, turn_id, archived)
         SELECT c, s, m, 'message', 'user', 'u1', 'alice', t, $6, 20, n, 1
           FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[]) AS u(c, s, m, t, n)`,
        [channels, seqs, ids, texts, turns, now],
      );
      const inserted = await client.query<{ rowid: string; index_key: string }>(
        `INSERT INTO memory_items (kind, content, scope, index_key, channel_id, message_id, author_id, author_name, content_hash, fts_tags, fts_text, created_at, updated_at)
         SELECT 'transcript', t, 'channel', 'c:' || c, c, m, 'u1', 'alice', h, g, f, $7, $7
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS u(c, m, t, h, g, f)
         RETURNING rowid, index_key`,
        [channels, ids, texts, hashes, tags, searchTexts, now],
      );
      if (owesVector) {
        await client.query(
          'INSERT INTO memory_vector_backlog (item_rowid, index_key) SELECT * FROM unnest($1::bigint[], $2::text[])',
          [inserted.rows.map((row) => row.rowid), inserted.rows.map((row) => row.index_key)],
        );
      }
      await client.query('COMMIT');
    };
    const archived = options.archived ?? 0;
    for (const batch of batches(0, archived, 5_000)) await insert(batch, false);
    const measured = batches(archived, archived + options.rows, options.batch);
    const started = process.hrtime.bigint();
    for (const batch of measured) await insert(batch, true);
    return options.rows / (Number(process.hrtime.bigint() - started) / 1e9);
  } finally {
    await client.end();
  }
}
