import type { SqlClient } from '../storage/sql-client.js';
import type { MemoryDialect } from './dialect.js';
import type { MemoryKind, MemoryType } from './types.js';

export interface ItemRow {
  rowid: number;
  kind: MemoryKind;
  content: string;
  memory_type: MemoryType | null;
  source_ids: string;
  created_at: number;
  channel_id: string;
  message_id: string | null;
  index_key: string;
  guild_id: string | null;
  author_name: string | null;
}

const ITEM_COLUMNS = 'rowid, kind, content, memory_type, source_ids, created_at, channel_id, message_id, index_key, guild_id, author_name';

/** The same columns read through the alias `n` (a neighbour). */
const NEIGHBOUR_COLUMNS = ITEM_COLUMNS.split(', ').map((column) => `n.${column}`).join(', ');

/** The messages just before and after a transcript row in its channel, in order. */
export interface Neighbourhood {
  before: ItemRow[];
  after: ItemRow[];
}

/**
 * Reads the rows behind search hits, many at a time: each statement is a round trip on
 * PostgreSQL, so hits and their neighbours are fetched per batch, not per hit.
 */
export class ItemRows {
  constructor(
    private readonly db: SqlClient,
    private readonly dialect: MemoryDialect,
  ) {}

  /** The rows of these labels (missing ones were deleted meanwhile). */
  async load(labels: readonly number[]): Promise<Map<number, ItemRow>> {
    const rows = new Map<number, ItemRow>();
    if (labels.length === 0) return rows;
    const list = padded(labels);
    const found = (await this.db
      .prepare(`SELECT ${ITEM_COLUMNS} FROM memory_items WHERE rowid IN (${list.map(() => '?').join(', ')})`)
      .all(...list)) as ItemRow[];
    for (const row of found) rows.set(row.rowid, row);
    return rows;
  }

  /** Up to `radius` transcript rows before and after each anchor, in its channel's order. */
  async neighbourhoods(anchors: readonly ItemRow[], radius: number): Promise<Map<number, Neighbourhood>> {
    const windows = new Map<number, Neighbourhood>();
    for (const anchor of anchors) windows.set(anchor.rowid, { before: [], after: [] });
    if (anchors.length === 0 || radius <= 0) return windows;
    const list = padded(anchors.map((anchor) => anchor.rowid));
    const earlier = `b.channel_id = a.channel_id AND b.kind = 'transcript' AND (b.created_at, b.rowid) < (a.created_at, a.rowid)
                     ORDER BY b.created_at DESC, b.rowid DESC LIMIT ?`;
    const later = `b.channel_id = a.channel_id AND b.kind = 'transcript' AND (b.created_at, b.rowid) > (a.created_at, a.rowid)
                   ORDER BY b.created_at, b.rowid LIMIT ?`;
    const { sql, params } = this.dialect.neighbourhoods({ columns: ITEM_COLUMNS, neighbourColumns: NEIGHBOUR_COLUMNS, earlier, later, list, radius });
    const rows = (await this.db.prepare(sql).all(...params)) as Array<ItemRow & { anchor: number }>;
    const byId = new Map(anchors.map((anchor) => [anchor.rowid, anchor]));
    for (const { anchor: anchorId, ...row } of rows) {
      const anchor = byId.get(anchorId)!;
      const window = windows.get(anchorId)!;
      (precedes(row, anchor) ? window.before : window.after).push(row);
    }
    for (const window of windows.values()) {
      window.before.sort(byTime);
      window.after.sort(byTime);
    }
    return windows;
  }
}

function precedes(row: ItemRow, anchor: ItemRow): boolean {
  return row.created_at < anchor.created_at || (row.created_at === anchor.created_at && row.rowid < anchor.rowid);
}

function byTime(left: ItemRow, right: ItemRow): number {
  return left.created_at - right.created_at || left.rowid - right.rowid;
}

/**
 * The list padded (repeating its last value) to a power of two, so that a handful of statement
 * texts serve every list length instead of one per length.
 */
export function padded(values: readonly number[]): number[] {
  let size = 8;
  while (size < values.length) size *= 2;
  const list = [...values];
  while (list.length < size) list.push(values[values.length - 1]!);
  return list;
}
