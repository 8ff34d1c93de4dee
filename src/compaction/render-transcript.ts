import type { HistoryEntry, SummaryEntry } from '../context/types.js';

/** `2026-11-22 14:05` in UTC: enough for the reader to place events in time. */
export function formatTimestamp(ms: number): string {
  const date = new Date(ms);
  // One odd time in stored history must not make every compaction of the channel fail.
  if (Number.isNaN(date.getTime())) return 'unknown time';
  return date.toISOString().slice(0, 16).replace('T', ' ');
}

/**
 * Renders history as a plain transcript that keeps who said what and when, for summarizers.
 * Tool traffic is shown briefly; it matters less than what people said.
 */
export function renderTranscript(entries: readonly HistoryEntry[]): string {
  const lines: string[] = [];
  for (const entry of entries) {
    const when = formatTimestamp(entry.createdAt);
    if (entry.kind === 'message') {
      lines.push(`[${when}] ${entry.authorName} (msg ${entry.messageId}): ${entry.content}`);
    } else if (entry.kind === 'tool_call') {
      lines.push(`[${when}] ${entry.authorName} used a tool: ${truncate(entry.content, 300)}`);
    } else {
      lines.push(`[${when}] tool result: ${truncate(entry.content, 300)}`);
    }
  }
  return lines.join('\n');
}

export function renderSummaries(summaries: readonly SummaryEntry[]): string {
  return summaries
    .map((summary) => `[${summary.kind} of seq ${summary.fromSeq}-${summary.toSeq}]\n${summary.content}`)
    .join('\n\n');
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
