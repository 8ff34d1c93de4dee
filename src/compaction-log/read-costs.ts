import type { SqlClient } from '../storage/sql-client.js';
import { MODEL_USAGE_KIND } from './log-row.js';
import { hasCompactionLog } from './read-log.js';


/** One channel request as the model counted it. */
export interface UsageRecord {
  channelId: string;
  at: number;
  /** Entries in the channel's history then (the report's x axis). */
  position: number;
  inputTokens: number;
  cacheWriteTokens: number;
  cacheReadTokens: number;
  billedInputTokens: number;
  outputTokens: number;
}

/** The channel requests logged, oldest first (one channel with `channelId`, only the newest with `last`). */
export async function readModelUsage(db: SqlClient, filter: { channelId?: string; last?: boolean } = {}): Promise<UsageRecord[]> {
  if (!(await hasCompactionLog(db))) return [];
  const where = filter.channelId === undefined ? 'kind = ?' : 'kind = ? AND channel_id = ?';
  const order = filter.last ? 'ORDER BY id DESC LIMIT 1' : 'ORDER BY channel_id, id';
  const parameters = filter.channelId === undefined ? [MODEL_USAGE_KIND] : [MODEL_USAGE_KIND, filter.channelId];
  const rows = (await db.prepare(`SELECT channel_id, at, position, data FROM compaction_log WHERE ${where} ${order}`).all(...parameters)) as Array<{
    channel_id: string;
    at: number;
    position: number;
    data: string;
  }>;
  return rows.map((row) => {
    const data = parseNumbers(row.data);
    return {
      channelId: row.channel_id,
      at: row.at,
      position: row.position,
      inputTokens: data.input_tokens ?? 0,
      cacheWriteTokens: data.cache_write_tokens ?? 0,
      cacheReadTokens: data.cache_read_tokens ?? 0,
      billedInputTokens: data.billed_input_tokens ?? 0,
      outputTokens: data.output_tokens ?? 0,
    };
  });
}

function parseNumbers(text: string): Record<string, number> {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null) return {};
    return Object.fromEntries(Object.entries(value).filter(([, number]) => typeof number === 'number' && Number.isFinite(number) && number >= 0)) as Record<string, number>;
  } catch {
    return {};
  }
}
