import type { SqlClient } from '../storage/sql-client.js';

/**
 * Where a channel's messages are now, read from the database: in the live context, folded into
 * a live summary, or behind a truncation marker (and in the archive either way). The three
 * add up to the messages the channel holds, so a replay's summary and `magpie status` can say
 * what left the context without counting a message twice (one truncated and later summarized
 * in place of its marker counts once, under the summary).
 */
export interface ContextCensus {
  channelId: string;
  /** Messages (not tool traffic) the channel's archive holds. */
  messages: number;
  liveMessages: number;
  underSummaries: number;
  underMarkers: number;
  /** Entries of every kind in the live context, and their estimated tokens. */
  liveEntries: number;
  liveEntryTokens: number;
  /** Live summaries and markers at the head of the context, and their estimated tokens. */
  summaries: number;
  markers: number;
  summaryTokens: number;
  /** Newest entry's time (ms), if any. */
  lastMessageAt: number | undefined;
}

export async function channelIdsWithHistory(db: SqlClient): Promise<string[]> {
  return ((await db.prepare('SELECT DISTINCT channel_id FROM history_entries ORDER BY channel_id').all()) as Array<{ channel_id: string }>).map(
    (row) => row.channel_id,
  );
}

/**
 * Turns with an entry in the live suffix. Their earlier entries are live too: a cut through
 * overlapping turns holds back a message whose reply lies past it (see the compaction planner),
 * and such a message, though its seq is inside a summary's range, was not summarized.
 */
const LIVE_TURNS = 'SELECT turn_id FROM history_entries WHERE channel_id = @channelId AND seq >= @liveFrom';

export async function contextCensus(db: SqlClient, channelId: string): Promise<ContextCensus> {
  const liveFrom =
    ((await db.prepare('SELECT live_from_seq FROM history_channels WHERE channel_id = ?').get(channelId)) as { live_from_seq: number } | undefined)
      ?.live_from_seq ?? 0;
  const counts = (await db
    .prepare(
      `SELECT SUM(CASE WHEN kind = 'message' THEN 1 ELSE 0 END) AS messages,
              SUM(CASE WHEN kind = 'message' AND live THEN 1 ELSE 0 END) AS live_messages,
              SUM(CASE WHEN live THEN 1 ELSE 0 END) AS live_entries,
              SUM(CASE WHEN live THEN tokens ELSE 0 END) AS live_tokens,
              MAX(created_at) AS last_at
         FROM (SELECT kind, tokens, created_at, (seq >= @liveFrom OR turn_id IN (${LIVE_TURNS})) AS live
                 FROM history_entries WHERE channel_id = @channelId) AS e`,
    )
    .get({ channelId, liveFrom })) as {
    messages: number | null;
    live_messages: number | null;
    live_entries: number | null;
    live_tokens: number | null;
    last_at: number | null;
  };
  const heads = (await db
    .prepare('SELECT kind, COUNT(*) AS total, SUM(tokens) AS tokens FROM history_summaries WHERE channel_id = ? AND live = 1 GROUP BY kind')
    .all(channelId)) as Array<{ kind: string; total: number; tokens: number }>;
  // Each message once: the ranges of live summaries can overlap (a summary that took a message
  // held back before starts at it, inside the range of the one that held it), and one under a
  // summary and a marker both counts under the summary. Under a summary means read by one: a
  // roll-up that folded a truncation marker spans messages no summarizer read, and those count
  // as cut, behind a marker (a summary kept no first message read before that was recorded).
  const within = (kind: string) =>
    `EXISTS (SELECT 1 FROM history_summaries s WHERE s.channel_id = e.channel_id AND s.live = 1 AND s.kind = '${kind}' AND e.seq BETWEEN s.from_seq AND s.to_seq)`;
  const read = `EXISTS (SELECT 1 FROM history_summaries r WHERE r.channel_id = e.channel_id AND r.kind = 'summary' AND e.seq BETWEEN COALESCE(r.read_from_seq, r.from_seq) AND r.to_seq)`;
  const covered = (await db
    .prepare(
      `SELECT CASE WHEN ${within('summary')} AND ${read} THEN 'summary' WHEN ${within('marker')} OR ${within('summary')} THEN 'marker' ELSE 'none' END AS kind, COUNT(*) AS total
         FROM history_entries e
        WHERE e.channel_id = @channelId AND e.kind = 'message' AND e.seq < @liveFrom
          AND e.turn_id NOT IN (${LIVE_TURNS})
        GROUP BY 1`,
    )
    .all({ channelId, liveFrom })) as Array<{ kind: string; total: number }>;
  const head = (kind: string) => heads.find((row) => row.kind === kind);
  return {
    channelId,
    messages: counts.messages ?? 0,
    liveMessages: counts.live_messages ?? 0,
    underSummaries: covered.find((row) => row.kind === 'summary')?.total ?? 0,
    underMarkers: covered.find((row) => row.kind === 'marker')?.total ?? 0,
    liveEntries: counts.live_entries ?? 0,
    liveEntryTokens: counts.live_tokens ?? 0,
    summaries: head('summary')?.total ?? 0,
    markers: head('marker')?.total ?? 0,
    summaryTokens: heads.reduce((sum, row) => sum + row.tokens, 0),
    lastMessageAt: counts.last_at ?? undefined,
  };
}
