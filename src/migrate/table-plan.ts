import type pg from 'pg';
import { MagpieError } from '../common/errors.js';
import type { Migration } from '../storage/database.js';
import { highestId, sourceColumns, sourceName, sourceTables, type SqliteSource } from './sqlite-sources.js';

/**
 * Rows about the index files of one data dir (what each file holds, by item rowid and vector
 * seq). They stay true only while those ids are unchanged: a source whose ids are shifted
 * leaves them out, and its indexes are rebuilt from the vectors on first use.
 */
const INDEX_STATE_TABLES: ReadonlySet<string> = new Set(['memory_index_state', 'memory_index_tombstones']);

/** Store-wide settings (the embedder): every shard must agree; they are kept once. */
const SHARED_TABLES: ReadonlySet<string> = new Set(['memory_meta']);

/** Tables the target keeps for itself: the migration record and the writer-lock bookkeeping. */
const TARGET_ONLY_TABLES: ReadonlySet<string> = new Set(['schema_migrations', 'storage_writers']);

/** What the copy does with one table. */
export interface TablePlan {
  name: string;
  /** Columns copied, named alike on both sides. */
  columns: string[];
  /** Primary key columns in PostgreSQL (to compare shared rows). */
  primaryKey: string[];
  /** The identity column, whose sequence is set past the copied ids. */
  identity?: string;
  /** Column → identity table whose per-source offset is added to it (the id itself, or a reference to one). */
  shifts: Map<string, string>;
  kind: 'plain' | 'index_state' | 'shared';
  /** Rows in each source, by source index. */
  sourceRows: number[];
}

export interface CopyPlan {
  /** In an order that satisfies foreign keys (referenced tables first). */
  tables: TablePlan[];
  /** Identity table → offset added to its ids in each source (0 for the first). */
  offsets: Map<string, bigint[]>;
  /** Identity table → highest id once copied (what its sequence is set to). */
  highest: Map<string, bigint>;
  /** Secondary indexes dropped for the copy and built again after it. */
  indexes: Array<{ table: string; name: string; definition: string }>;
}

interface TargetColumn {
  name: string;
  writable: boolean;
  required: boolean;
  identity: boolean;
}

/** Reads the target schema's catalog and matches every source table to it. */
export async function planCopy(client: pg.ClientBase, schema: string, sources: readonly SqliteSource[]): Promise<CopyPlan> {
  const columns = await targetColumns(client, schema);
  const references = await targetReferences(client, schema);
  const primaryKeys = await targetPrimaryKeys(client, schema);
  const names = sourceTables(sources[0]!.db);
  for (const source of sources.slice(1)) {
    const other = sourceTables(source.db);
    if (other.join() !== names.join()) {
      throw new MagpieError('migrate_source_mismatch', `${sourceName(source)} has other tables than ${sourceName(sources[0]!)}`, {
        hint: 'run a writing command of this Magpie (magpie replay or start) on each data dir once, then migrate again',
      });
    }
  }
  const offsets = new Map<string, bigint[]>();
  const highest = new Map<string, bigint>();
  const tables: TablePlan[] = [];
  for (const name of names) {
    const target = columns.get(name);
    if (!target) {
      throw new MagpieError('migrate_unknown_table', `table ${name} of the SQLite data has no counterpart in PostgreSQL schema ${schema}`, {
        hint: 'this build of Magpie cannot carry that table; use the Magpie version that wrote the data dir',
      });
    }
    const copied = sourceColumns(sources[0]!.db, name);
    for (const column of copied) {
      if (!target.find((candidate) => candidate.name === column && candidate.writable)) {
        throw new MagpieError('migrate_unknown_column', `column ${name}.${column} of the SQLite data has no writable counterpart in PostgreSQL`, {
          hint: 'this build of Magpie cannot carry that column; use the Magpie version that wrote the data dir',
        });
      }
    }
    const missing = target.filter((column) => column.required && !copied.includes(column.name));
    if (missing.length > 0) {
      throw new MagpieError('migrate_missing_column', `PostgreSQL needs ${missing.map((column) => `${name}.${column.name}`).join(', ')}, which the SQLite data lacks`);
    }
    const identity = target.find((column) => column.identity)?.name;
    if (identity !== undefined) {
      // Each source's ids start past the previous sources' ids: shards numbered theirs alike.
      let offset = 0n;
      const perSource: bigint[] = [];
      for (const source of sources) {
        perSource.push(offset);
        offset += highestId(source.db, name, identity);
      }
      offsets.set(name, perSource);
      highest.set(name, offset);
    }
    tables.push({
      name,
      columns: copied,
      primaryKey: primaryKeys.get(name) ?? [],
      ...(identity === undefined ? {} : { identity }),
      shifts: new Map(),
      kind: INDEX_STATE_TABLES.has(name) ? 'index_state' : SHARED_TABLES.has(name) ? 'shared' : 'plain',
      sourceRows: sources.map((source) => Number(source.db.prepare(`SELECT count(*) FROM "${name}"`).pluck().get())),
    });
  }
  for (const table of tables) {
    if (table.identity !== undefined) table.shifts.set(table.identity, table.name);
    for (const reference of references.filter((candidate) => candidate.table === table.name)) {
      const referenced = tables.find((candidate) => candidate.name === reference.referenced);
      if (referenced?.identity === reference.referencedColumn) table.shifts.set(reference.column, referenced.name);
    }
  }
  const indexes = await secondaryIndexes(client, schema);
  return { tables: inDependencyOrder(tables, references), offsets, highest, indexes: indexes.filter((index) => tables.some((table) => table.name === index.table)) };
}

/** Whether any id of this source is renumbered (then its index-state rows are not carried). */
export function isShifted(plan: CopyPlan, sourceIndex: number): boolean {
  return [...plan.offsets.values()].some((perSource) => (perSource[sourceIndex] ?? 0n) !== 0n);
}

/**
 * The tables of the target schema that Magpie's migrations create: the ones checked for data,
 * locked and (with --force) emptied. Other tables sharing the schema are never touched.
 */
export async function targetDataTables(client: pg.ClientBase, schema: string, migrations: readonly Migration[]): Promise<string[]> {
  const created = new Set<string>();
  for (const migration of migrations) {
    for (const match of (migration.postgres ?? '').matchAll(/CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"?(\w+)"?/gi)) created.add(match[1]!);
  }
  const columns = await targetColumns(client, schema);
  return [...columns.keys()].filter((name) => created.has(name) && !TARGET_ONLY_TABLES.has(name)).sort();
}

async function targetColumns(client: pg.ClientBase, schema: string): Promise<Map<string, TargetColumn[]>> {
  const result = await client.query<{ table_name: string; column_name: string; generated: boolean; identity: boolean; required: boolean }>(
    `SELECT c.relname AS table_name, a.attname AS column_name, a.attgenerated <> '' AS generated, a.attidentity <> '' AS identity,
            (a.attnotnull AND NOT a.atthasdef AND a.attidentity = '' AND a.attgenerated = '') AS required
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY c.relname, a.attnum`,
    [schema],
  );
  const tables = new Map<string, TargetColumn[]>();
  for (const row of result.rows) {
    const list = tables.get(row.table_name) ?? [];
    list.push({ name: row.column_name, writable: !row.generated, required: row.required, identity: row.identity });
    tables.set(row.table_name, list);
  }
  return tables;
}

interface Reference {
  table: string;
  column: string;
  referenced: string;
  referencedColumn: string;
}

async function targetReferences(client: pg.ClientBase, schema: string): Promise<Reference[]> {
  const result = await client.query<{ table_name: string; column_name: string; referenced: string; referenced_column: string }>(
    `SELECT source.relname AS table_name, a.attname AS column_name, target.relname AS referenced, b.attname AS referenced_column
       FROM pg_constraint k
       JOIN pg_class source ON source.oid = k.conrelid
       JOIN pg_class target ON target.oid = k.confrelid
       JOIN pg_namespace n ON n.oid = source.relnamespace
       CROSS JOIN LATERAL unnest(k.conkey, k.confkey) AS pair(from_number, to_number)
       JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = pair.from_number
       JOIN pg_attribute b ON b.attrelid = k.confrelid AND b.attnum = pair.to_number
      WHERE k.contype = 'f' AND n.nspname = $1`,
    [schema],
  );
  return result.rows.map((row) => ({ table: row.table_name, column: row.column_name, referenced: row.referenced, referencedColumn: row.referenced_column }));
}

async function targetPrimaryKeys(client: pg.ClientBase, schema: string): Promise<Map<string, string[]>> {
  const result = await client.query<{ table_name: string; column_name: string }>(
    `SELECT c.relname AS table_name, a.attname AS column_name
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indrelid
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
      WHERE i.indisprimary AND n.nspname = $1
      ORDER BY c.relname, array_position(i.indkey, a.attnum)`,
    [schema],
  );
  const keys = new Map<string, string[]>();
  for (const row of result.rows) keys.set(row.table_name, [...(keys.get(row.table_name) ?? []), row.column_name]);
  return keys;
}

/**
 * Indexes no constraint depends on. Filling a table and then building such an index (a GIN
 * index over full text above all) is about twice as fast as updating it row by row.
 */
async function secondaryIndexes(client: pg.ClientBase, schema: string): Promise<Array<{ table: string; name: string; definition: string }>> {
  const result = await client.query<{ table_name: string; index_name: string; definition: string }>(
    `SELECT t.relname AS table_name, i.relname AS index_name, pg_get_indexdef(x.indexrelid) AS definition
       FROM pg_index x
       JOIN pg_class i ON i.oid = x.indexrelid
       JOIN pg_class t ON t.oid = x.indrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
      WHERE n.nspname = $1 AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)
      ORDER BY t.relname, i.relname`,
    [schema],
  );
  return result.rows.map((row) => ({ table: row.table_name, name: row.index_name, definition: row.definition }));
}

/** Referenced tables before the tables that reference them. */
function inDependencyOrder(tables: TablePlan[], references: readonly Reference[]): TablePlan[] {
  const ordered: TablePlan[] = [];
  const placed = new Set<string>();
  const visit = (table: TablePlan, path: Set<string>) => {
    if (placed.has(table.name) || path.has(table.name)) return;
    path.add(table.name);
    for (const reference of references.filter((candidate) => candidate.table === table.name && candidate.referenced !== table.name)) {
      const referenced = tables.find((candidate) => candidate.name === reference.referenced);
      if (referenced) visit(referenced, path);
    }
    placed.add(table.name);
    ordered.push(table);
  };
  for (const table of tables) visit(table, new Set());
  return ordered;
}
