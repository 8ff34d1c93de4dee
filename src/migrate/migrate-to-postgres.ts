import pg from 'pg';
import { MagpieError } from '../common/errors.js';
import { ALL_MIGRATIONS } from '../app/migrations.js';
import { openStorageForWriting, type StorageTarget } from '../storage/open-storage.js';
import { redactUrl } from '../storage/postgres/pg-error.js';
import { copyTable, quote } from './copy-table.js';
import { setSequences } from './sequences.js';
import { checkDisjointChannels, openSources, type SqliteSource } from './sqlite-sources.js';
import { isShifted, planCopy, targetDataTables, type CopyPlan } from './table-plan.js';
import { verifyCopy, type Verification } from './verify-copy.js';

export type MigratePhase = 'copy' | 'indexes' | 'verify';

export interface MigrateOptions {
  /** The SQLite data dir (its `shard-<N>` dirs are copied too). */
  dataDir: string;
  target: Extract<StorageTarget, { backend: 'postgres' }>;
  /** Replace what the target schema holds (in the same transaction) instead of refusing. */
  force?: boolean;
  rowsPerStatement?: number;
  /** Work done in a phase: rows copied, indexes built, checks run. */
  onProgress?: (phase: MigratePhase, done: number, total: number) => void;
  /** Told as COMMIT is sent and once it succeeded: after that, stopping no longer undoes the copy. */
  onCommit?: (state: 'committing' | 'committed') => void;
}

export interface MigratedSource {
  dir: string;
  shardId?: number;
  /** Identity table → what was added to its ids (all 0 for the first source). */
  offsets: Record<string, string>;
  /** Its index files describe the old ids: each index is rebuilt from the vectors on first use. */
  indexesRebuilt: boolean;
}

export interface MigrateResult {
  sources: MigratedSource[];
  tables: Array<{ name: string; rows: number }>;
  rows: number;
  /** The target held Magpie data that --force replaced. */
  replaced: string[];
  verification: Verification;
  /** Committed (false: a verification mismatch rolled everything back). */
  committed: boolean;
  durationMs: number;
  copyMs: number;
  indexesMs: number;
  verifyMs: number;
}

/**
 * Copies a SQLite data dir into a PostgreSQL schema in one transaction: every table of every
 * source (the data dir, or its shard dirs), ids as stored, identity sequences set past them,
 * secondary indexes built once at the end, and the result verified (row counts, checksums of
 * messages, memories and vectors) before COMMIT. A failure, a mismatch or a killed process
 * leaves the target's data as it was. The SQLite sources are held under their writer locks
 * and the target under the PostgreSQL writer lock of every key it knows.
 */
export async function migrateToPostgres(options: MigrateOptions): Promise<MigrateResult> {
  const started = performance.now();
  const opened = await openSources(options.dataDir, ALL_MIGRATIONS);
  const releases: Array<() => void | Promise<void>> = [() => opened.close()];
  try {
    checkDisjointChannels(opened.sources);
    const storage = await openStorageForWriting(options.target, ALL_MIGRATIONS, { command: 'magpie migrate', writerKey: 'all' });
    releases.unshift(() => storage.close());
    // Shard processes write under keys of their own: none of them may be running either.
    const db = storage.db;
    const keys = (await db.prepare(`SELECT lock_key FROM storage_writers WHERE lock_key <> 'all'`).pluck().all()) as string[];
    for (const key of keys) {
      const lock = await storage.lockWriterKey!(key);
      releases.unshift(() => lock.release());
    }
    const client = new pg.Client({ connectionString: options.target.url, application_name: 'magpie migrate' });
    client.on('error', () => undefined);
    await client.connect();
    releases.unshift(() => client.end().catch(() => undefined));
    await client.query(`SET search_path TO ${quote(options.target.schema)}`);
    return await inTransaction(client, options, opened.sources, started);
  } finally {
    for (const release of releases) await release();
  }
}

async function inTransaction(client: pg.Client, options: MigrateOptions, sources: SqliteSource[], started: number): Promise<MigrateResult> {
  const { schema } = options.target;
  await client.query('BEGIN');
  let open = true;
  const rollback = async () => {
    if (!open) return;
    open = false;
    await client.query('ROLLBACK').catch(() => undefined);
  };
  try {
    const plan = await planCopy(client, schema, sources);
    const dataTables = [...new Set([...plan.tables.map((table) => table.name), ...(await targetDataTables(client, schema, ALL_MIGRATIONS))])].sort();
    // Taken at once or not at all: a session reading or writing these tables (a bot left
    // running on this schema) is reported instead of waited for.
    await client.query(`SET LOCAL lock_timeout = '10s'`);
    try {
      await client.query(`LOCK TABLE ${dataTables.map(quote).join(', ')} IN ACCESS EXCLUSIVE MODE`);
    } catch (error) {
      if ((error as { code?: string }).code !== '55P03') throw error;
      throw new MagpieError('migrate_target_busy', `another session holds tables of schema ${schema} in ${redactUrl(options.target.url)}`, {
        hint: 'stop every Magpie process using that schema, then run the same command again',
      });
    }
    await client.query(`SET LOCAL lock_timeout = 0`);
    const holding = await tablesWithRows(client, dataTables);
    if (holding.length > 0 && !options.force) {
      throw new MagpieError('migrate_target_not_empty', `schema ${schema} in ${redactUrl(options.target.url)} already holds Magpie data (${holding.join(', ')})`, {
        context: { schema, tables: holding },
        hint: 'choose another schema (--schema NAME), or pass --force to replace that data with the data dir\'s (in the same transaction: if the copy fails, the old data stays)',
      });
    }
    if (holding.length > 0) await client.query(`TRUNCATE ${dataTables.map(quote).join(', ')} RESTART IDENTITY`);

    for (const index of plan.indexes) await client.query(`DROP INDEX ${quote(index.name)}`);
    const total = plan.tables.reduce((sum, table) => sum + table.sourceRows.reduce((rows, count) => rows + count, 0), 0);
    let done = 0;
    const copyStarted = performance.now();
    const tables: MigrateResult['tables'] = [];
    for (const table of plan.tables) {
      let rows = 0;
      for (const [sourceIndex, source] of sources.entries()) {
        rows += await copyTable({
          client,
          plan,
          table,
          source,
          sourceIndex,
          ...(options.rowsPerStatement === undefined ? {} : { rowsPerStatement: options.rowsPerStatement }),
          onRows: (count) => {
            done += count;
            options.onProgress?.('copy', done, total);
          },
        });
      }
      tables.push({ name: table.name, rows });
    }
    const copyMs = performance.now() - copyStarted;

    const indexesStarted = performance.now();
    for (const [built, index] of plan.indexes.entries()) {
      options.onProgress?.('indexes', built, plan.indexes.length);
      await client.query(index.definition);
    }
    await setSequences(client, plan);
    const indexesMs = performance.now() - indexesStarted;

    const verifyStarted = performance.now();
    options.onProgress?.('verify', 0, 1);
    const verification = await verifyCopy(client, plan, sources);
    const verifyMs = performance.now() - verifyStarted;
    if (verification.ok) {
      options.onCommit?.('committing');
      await client.query('COMMIT');
      open = false;
      options.onCommit?.('committed');
      // Fresh statistics, so the first queries on the copied tables are planned on real sizes;
      // autovacuum would get there too, so a refusal here changes nothing that was committed.
      await client.query(`ANALYZE ${plan.tables.map((table) => quote(table.name)).join(', ')}`).catch(() => undefined);
    } else {
      await rollback();
    }
    return {
      sources: describeSources(plan, sources),
      tables,
      rows: tables.reduce((sum, table) => sum + table.rows, 0),
      replaced: holding,
      verification,
      committed: verification.ok,
      durationMs: performance.now() - started,
      copyMs,
      indexesMs,
      verifyMs,
    };
  } finally {
    await rollback();
  }
}

async function tablesWithRows(client: pg.ClientBase, tables: readonly string[]): Promise<string[]> {
  const holding: string[] = [];
  for (const table of tables) {
    const result = await client.query<{ present: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${quote(table)}) AS present`);
    if (result.rows[0]?.present) holding.push(table);
  }
  return holding;
}

function describeSources(plan: CopyPlan, sources: readonly SqliteSource[]): MigratedSource[] {
  return sources.map((source, index) => ({
    dir: source.dir,
    ...(source.shardId === undefined ? {} : { shardId: source.shardId }),
    offsets: Object.fromEntries([...plan.offsets].map(([table, perSource]) => [table, (perSource[index] ?? 0n).toString()])),
    indexesRebuilt: isShifted(plan, index),
  }));
}
