/** The log's kind for one priced model request of a channel (a reply, or a replay's priced reply). */
export const MODEL_USAGE_KIND = 'model_usage';

/** One row of `compaction_log` as written (the id is SQLite's). */
export interface LogRow {
  channel_id: string;
  at: number;
  kind: string;
  tier: string | null;
  position: number;
  usage: number | null;
  data: string;
}
