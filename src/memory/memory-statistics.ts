import { itemId, parseSourceIds } from './search-results.js';
import { visibility } from './scope.js';
import { checkLocation, type StoreContext } from './store-context.js';
import type { MemoryKind, MemoryLocation, MemoryRecord, MemoryScopeKind, MemoryStats, MemoryType } from './types.js';

interface RecordRow {
  rowid: number;
  kind: MemoryKind;
  content: string;
  memory_type: MemoryType | null;
  importance: number | null;
  scope: MemoryScopeKind;
  index_key: string;
  channel_id: string;
  guild_id: string | null;
  message_id: string | null;
  source_ids: string;
  created_at: number;
  updated_at: number;
}

/** What memory holds, for the CLI, `/memory` and the metrics: lists, counts, channels. */
export class MemoryStatistics {
  constructor(private readonly context: StoreContext) {}

  async list(options: { location?: MemoryLocation; kind?: MemoryKind; limit?: number }): Promise<MemoryRecord[]> {
    const clauses: string[] = [];
    const params: unknown[] = [];
    if (options.location) {
      const seen = await visibility(checkLocation(options.location), this.context.scope, this.context.views);
      clauses.push(seen.sql);
      params.push(...seen.params);
    }
    if (options.kind) {
      clauses.push('i.kind = ?');
      params.push(options.kind);
    }
    const where = clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : '';
    const limit = Math.max(1, Math.min(options.limit ?? 50, 10_000));
    const rows = (await this.context.db
      .prepare(
        `SELECT i.rowid, i.kind, i.content, i.memory_type, i.importance, i.scope, i.index_key, i.channel_id, i.guild_id,
           i.message_id, i.source_ids, i.created_at, i.updated_at
         FROM memory_items i ${where} ORDER BY i.created_at DESC, i.rowid DESC LIMIT ?`,
      )
      .all(...params, limit)) as RecordRow[];
    return rows.map(toRecord);
  }

  async stats(location?: MemoryLocation): Promise<MemoryStats> {
    const { db, embedder, indexes, backlog } = this.context;
    let where = '';
    let params: unknown[] = [];
    let keys: string[] | undefined;
    if (location) {
      const seen = await visibility(checkLocation(location), this.context.scope, this.context.views);
      where = `WHERE ${seen.sql}`;
      params = seen.params;
      keys = seen.keys;
    }
    const rows = (await db
      .prepare(`SELECT i.kind, i.memory_type, COUNT(*) AS total FROM memory_items i ${where} GROUP BY i.kind, i.memory_type`)
      .all(...params)) as Array<{ kind: MemoryKind; memory_type: MemoryType | null; total: number }>;
    const stats: MemoryStats = {
      memories: 0,
      transcriptEntries: 0,
      byType: {},
      embedder: embedder.name,
      dimension: embedder.dimension,
      indexedVectors: 0,
      pendingVectors: 0,
    };
    for (const row of rows) {
      if (row.kind === 'transcript') stats.transcriptEntries += row.total;
      else {
        stats.memories += row.total;
        if (row.memory_type) stats.byType[row.memory_type] = (stats.byType[row.memory_type] ?? 0) + row.total;
      }
    }
    const counts = await indexes.counts(keys);
    stats.indexedVectors = counts.indexed;
    // Owed vectors (not yet embedded) are pending too, as much as those not yet in an index.
    stats.pendingVectors = counts.pending + (await backlog.size(keys));
    return stats;
  }

  /** Channels that have anything stored, most recently active first (for CLI hints). */
  async channelIds(limit: number): Promise<string[]> {
    const rows = (await this.context.db
      .prepare('SELECT channel_id FROM memory_items GROUP BY channel_id ORDER BY MAX(rowid) DESC LIMIT ?')
      .all(limit)) as Array<{ channel_id: string }>;
    return rows.map((row) => row.channel_id);
  }
}

function toRecord(row: RecordRow): MemoryRecord {
  const record: MemoryRecord = {
    id: itemId(row),
    kind: row.kind,
    content: row.content,
    scope: row.scope,
    channelId: row.channel_id,
    sourceIds: row.kind === 'transcript' ? (row.message_id ? [row.message_id] : []) : parseSourceIds(row.source_ids),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
  if (row.memory_type) record.memoryType = row.memory_type;
  if (row.importance !== null) record.importance = row.importance;
  if (row.guild_id) record.guildId = row.guild_id;
  return record;
}
