import { hasTable } from '../storage/read-only.js';
import type { SqlClient } from '../storage/sql-client.js';
import { MODEL_USAGE_KIND, type LogRow } from './log-row.js';

/** One usage sample: where in the conversation, how full the window was. */
export interface UsagePoint {
  /** Row id: samples and events interleave in this order. */
  id: number;
  position: number;
  usage: number;
  at: number;
}

/** One compaction event as logged. */
export interface LoggedEvent {
  id: number;
  kind: string;
  tier: string | null;
  position: number;
  /** Usage right after it (the trigger's usage for `compaction_triggered`), when known. */
  usage: number | null;
  at: number;
  data: Record<string, unknown>;
}

/** The compaction settings in force from `position` on. */
export interface LoggedSettings {
  position: number;
  at: number;
  values: Record<string, number>;
}

/** Everything logged for one channel, in order. */
export interface ChannelLog {
  channelId: string;
  samples: UsagePoint[];
  events: LoggedEvent[];
  settings: LoggedSettings[];
}

type Row = LogRow & { id: number };

/** Whether the database has a compaction log at all (a data dir from an older version has not). */
export function hasCompactionLog(db: SqlClient): Promise<boolean> {
  return hasTable(db, 'compaction_log');
}

/** The whole log, per channel (one channel with `channelId`), channels in id order. */
export async function readCompactionLog(db: SqlClient, filter: { channelId?: string } = {}): Promise<ChannelLog[]> {
  if (!(await hasCompactionLog(db))) return [];
  const rows = (
    filter.channelId === undefined
      ? db.prepare('SELECT * FROM compaction_log ORDER BY channel_id, id').iterate()
      : db.prepare('SELECT * FROM compaction_log WHERE channel_id = ? ORDER BY id').iterate(filter.channelId)
  ) as AsyncIterableIterator<Row>;
  const channels = new Map<string, ChannelLog>();
  for await (const row of rows) {
    let log = channels.get(row.channel_id);
    if (!log) {
      log = { channelId: row.channel_id, samples: [], events: [], settings: [] };
      channels.set(row.channel_id, log);
    }
    // Model usage rows are the cost view's (`readModelUsage`), not compaction events.
    if (row.kind === MODEL_USAGE_KIND) continue;
    if (row.kind === 'usage') {
      log.samples.push({ id: row.id, position: row.position, usage: row.usage ?? 0, at: row.at });
    } else if (row.kind === 'settings') {
      log.settings.push({ position: row.position, at: row.at, values: parseObject(row.data) as Record<string, number> });
    } else {
      log.events.push({
        id: row.id,
        kind: row.kind,
        tier: row.tier,
        position: row.position,
        usage: row.usage,
        at: row.at,
        data: parseObject(row.data),
      });
    }
  }
  return [...channels.values()];
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
