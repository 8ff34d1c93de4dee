import { channelIdsWithHistory, contextCensus } from '../../channel/census.js';
import type { MagpieEvent } from '../../common/events.js';
import type { ReplayProgress } from '../replay-lines.js';
import type { SqlClient } from '../../storage/sql-client.js';

/** Counts what the events say, for the final summary. */
export class ReplayTally {
  tiers = { background: 0, aggressive: 0, emergency: 0 };
  completed = 0;
  failed = 0;
  replanned = 0;
  messagesCompacted = 0;
  messagesTruncated = 0;
  /** Messages a worker summarized after emergency truncation had already cut them. */
  messagesResummarized = 0;
  memoriesSaved = 0;
  tokensFreed = 0;

  count(event: MagpieEvent): void {
    if (event.type === 'compaction_triggered') {
      const tier = event.tier as keyof ReplayTally['tiers'];
      if (tier in this.tiers) this.tiers[tier] += 1;
    } else if (event.type === 'compaction_completed') {
      this.completed += 1;
      this.messagesCompacted += Number(event.messages_compacted);
      if (event.replaced_marker === true) this.messagesResummarized += Number(event.messages_compacted);
      this.memoriesSaved += Number(event.memories_saved);
      this.tokensFreed += Number(event.tokens_freed);
    } else if (event.type === 'compaction_failed') {
      this.failed += 1;
    } else if (event.type === 'compaction_replanned') {
      this.replanned += 1;
    } else if (event.type === 'emergency_truncation') {
      this.messagesTruncated += Number(event.messages_dropped);
      this.tokensFreed += Number(event.tokens_freed);
    }
  }
}

/** Where the data dir's messages are at the end, summed over the replayed channels. */
export interface ArchiveCensus {
  messages: number;
  live: number;
  underSummaries: number;
  underMarkers: number;
}

export async function archiveCensus(db: SqlClient, channels: ReadonlySet<string>): Promise<ArchiveCensus> {
  const total: ArchiveCensus = { messages: 0, live: 0, underSummaries: 0, underMarkers: 0 };
  const known = new Set(await channelIdsWithHistory(db));
  for (const channelId of channels) {
    if (!known.has(channelId)) continue;
    const census = await contextCensus(db, channelId);
    total.messages += census.messages;
    total.live += census.liveMessages;
    total.underSummaries += census.underSummaries;
    total.underMarkers += census.underMarkers;
  }
  return total;
}

export type ReplaySummary = ReturnType<typeof replaySummary>;

/**
 * The `replay_summary` line. The fields of the design's contract stay as they were; the census
 * fields say where every message is now, so the numbers add up:
 * `archived_messages = live_messages + messages_under_summaries + messages_under_markers`.
 */
export function replaySummary(
  tally: ReplayTally,
  progress: ReplayProgress,
  census: ArchiveCensus,
  options: { summarizerKind: string; workerLag: number; durationMs: number; interrupted?: string },
) {
  return {
    type: 'replay_summary',
    messages: progress.messages,
    duplicates: progress.duplicates,
    conflicts: progress.conflicts,
    channels: progress.channels.size,
    tiers: { ...tally.tiers },
    compactions_completed: tally.completed,
    compactions_failed: tally.failed,
    compactions_replanned: tally.replanned,
    messages_compacted: tally.messagesCompacted,
    messages_truncated: tally.messagesTruncated,
    messages_resummarized: tally.messagesResummarized,
    memories_saved: tally.memoriesSaved,
    tokens_freed: tally.tokensFreed,
    archived_messages: census.messages,
    live_messages: census.live,
    messages_left_context: census.messages - census.live,
    messages_under_summaries: census.underSummaries,
    messages_under_markers: census.underMarkers,
    summarizer: options.summarizerKind,
    worker_lag: options.workerLag,
    duration_ms: Math.round(options.durationMs),
    messages_per_second: Math.round((progress.messages + progress.duplicates) / Math.max(options.durationMs / 1000, 1e-3)),
    ...(options.interrupted ? { interrupted: options.interrupted, lines_read: progress.lines } : {}),
    ...(progress.error ? { error: progress.error.message } : {}),
  };
}

/** The human summary: flow (what compaction did) and stock (where the messages are now). */
export function readableSummary(summary: ReplaySummary): string {
  const lines = [
    `Replayed ${summary.messages} messages in ${summary.channels} channel(s)` +
      (summary.duplicates > 0 ? ` (${summary.duplicates} already present, skipped)` : '') +
      (summary.conflicts > 0 ? ` (${summary.conflicts} reused an id with other text: conflicts, see stderr)` : '') +
      ` in ${(summary.duration_ms / 1000).toFixed(1)} s (${summary.messages_per_second} messages/s).`,
    `Compaction triggered: background ${summary.tiers.background}, aggressive ${summary.tiers.aggressive}, emergency ${summary.tiers.emergency}.`,
    `Workers: ${summary.compactions_completed} summaries written (${summary.memories_saved} memories saved), ` +
      `${summary.compactions_failed} failed, ${summary.compactions_replanned} re-planned; ${summary.tokens_freed} tokens freed in all.`,
    `Where the ${summary.archived_messages} messages of these channels are now (every one stays in the archive and memory_search):`,
    `  ${pad(summary.live_messages)} in the live context`,
    `  ${pad(summary.messages_under_summaries)} folded into summaries`,
    `  ${pad(summary.messages_under_markers)} cut by emergency truncation, behind a marker, not summarized`,
  ];
  if (summary.messages_truncated > 0 || summary.messages_compacted > 0) {
    let along =
      `Along the way, workers summarized ${summary.messages_compacted} messages and emergency truncation cut ` +
      `${summary.messages_truncated}`;
    if (summary.messages_resummarized > 0) {
      along += `; ${summary.messages_resummarized} of them were cut first and summarized later in place of the marker, so they count in both`;
    }
    lines.push(`${along}.`);
  }
  lines.push('');
  return lines.join('\n');
}

function pad(value: number): string {
  return String(value).padStart(7);
}
