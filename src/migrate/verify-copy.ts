import { createHash } from 'node:crypto';
import type pg from 'pg';
import { quote } from './copy-table.js';
import { sequencePositions } from './sequences.js';
import type { SqliteSource } from './sqlite-sources.js';
import { isShifted, type CopyPlan, type TablePlan } from './table-plan.js';

/**
 * What is compared after the copy, each side computed on its own: the source read again from
 * SQLite, the target by PostgreSQL. A row's checksum is the first 60 bits of the MD5 of its
 * parts joined by U+001F; a table's is their sum, so neither side needs an order.
 */
const CHECKSUMS = [
  { label: 'messages', table: 'history_entries', parts: [text('channel_id'), integer('seq'), text('message_id'), text('content')] },
  { label: 'memory items', table: 'memory_items', parts: [integer('rowid'), text('content')] },
  { label: 'vectors', table: 'memory_vectors', parts: [integer('seq'), integer('item_rowid'), bytes('vector')] },
] as const;

interface Part {
  column: string;
  /** The same text as the source side makes of the value. */
  sql: string;
}

function text(column: string): Part {
  return { column, sql: `coalesce(${quote(column)}, '')` };
}
function integer(column: string): Part {
  return { column, sql: `coalesce(${quote(column)}::text, '')` };
}
function bytes(column: string): Part {
  return { column, sql: `coalesce(encode(${quote(column)}, 'hex'), '')` };
}

export interface TableCount {
  table: string;
  expected: number;
  actual: number;
}

export interface ChecksumResult {
  label: string;
  table: string;
  rows: number;
  expected: string;
  actual: string;
}

export interface SequenceResult {
  table: string;
  expected: string;
  actual: string;
}

export interface Verification {
  ok: boolean;
  counts: TableCount[];
  checksums: ChecksumResult[];
  sequences: SequenceResult[];
}

export async function verifyCopy(client: pg.ClientBase, plan: CopyPlan, sources: readonly SqliteSource[]): Promise<Verification> {
  const counts: TableCount[] = [];
  for (const table of plan.tables) {
    const result = await client.query<{ rows: string }>(`SELECT count(*)::text AS rows FROM ${quote(table.name)}`);
    counts.push({ table: table.name, expected: expectedRows(table, plan, sources), actual: Number(result.rows[0]!.rows) });
  }
  const checksums: ChecksumResult[] = [];
  for (const checksum of CHECKSUMS) {
    const table = plan.tables.find((candidate) => candidate.name === checksum.table);
    if (!table) continue;
    const expected = sourceChecksum(table, checksum.parts, plan, sources);
    const row = `${checksum.parts.map((part) => part.sql).join(` || chr(31) || `)}`;
    const result = await client.query<{ rows: string; sum: string }>(
      `SELECT count(*)::text AS rows, coalesce(sum(('x' || substr(md5(${row}), 1, 15))::bit(60)::bigint), 0)::text AS sum FROM ${quote(table.name)}`,
    );
    checksums.push({ label: checksum.label, table: table.name, rows: expected.rows, expected: expected.sum.toString(), actual: result.rows[0]!.sum });
  }
  const positions = await sequencePositions(client, plan);
  const sequences: SequenceResult[] = [...positions].map(([table, actual]) => ({ table, expected: (plan.highest.get(table) ?? 0n).toString(), actual }));
  const ok =
    counts.every((count) => count.expected === count.actual) &&
    checksums.every((checksum) => checksum.expected === checksum.actual) &&
    sequences.every((sequence) => sequence.expected === sequence.actual);
  return { ok, counts, checksums, sequences };
}

/** Rows the target must hold: every source's, less what the plan leaves out or keeps once. */
function expectedRows(table: TablePlan, plan: CopyPlan, sources: readonly SqliteSource[]): number {
  if (table.kind === 'shared') {
    const key = table.primaryKey.length > 0 ? table.primaryKey : table.columns;
    const distinct = new Set<string>();
    for (const source of sources) {
      const rows = source.db.prepare(`SELECT ${key.map(quote).join(', ')} FROM ${quote(table.name)}`).raw(true).all() as unknown[][];
      for (const row of rows) distinct.add(JSON.stringify(row));
    }
    return distinct.size;
  }
  return table.sourceRows.reduce((sum, rows, index) => sum + (table.kind === 'index_state' && isShifted(plan, index) ? 0 : rows), 0);
}

function sourceChecksum(table: TablePlan, parts: readonly Part[], plan: CopyPlan, sources: readonly SqliteSource[]): { rows: number; sum: bigint } {
  let rows = 0;
  let sum = 0n;
  sources.forEach((source, index) => {
    const shifts = parts.map((part) => {
      const identityTable = table.shifts.get(part.column);
      return identityTable === undefined ? 0n : (plan.offsets.get(identityTable)?.[index] ?? 0n);
    });
    const select = source.db.prepare(`SELECT ${parts.map((part) => quote(part.column)).join(', ')} FROM ${quote(table.name)}`).raw(true).safeIntegers(true);
    for (const row of select.iterate() as IterableIterator<unknown[]>) {
      const joined = row.map((value, column) => partText(value, shifts[column]!)).join('\u001f');
      sum += BigInt(`0x${createHash('md5').update(joined, 'utf8').digest('hex').slice(0, 15)}`);
      rows += 1;
    }
  });
  return { rows, sum };
}

function partText(value: unknown, shift: bigint): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'bigint') return (value + shift).toString();
  if (Buffer.isBuffer(value)) return value.toString('hex');
  return String(value);
}
