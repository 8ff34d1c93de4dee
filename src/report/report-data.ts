import { basename } from 'node:path';
import type { ChannelLog, CompactionTally, LoggedEvent, LoggedSettings } from '../compaction-log/index.js';
import { readCompactionLog, sumTallies, tallyLog } from '../compaction-log/index.js';
import type { SqlClient } from '../storage/sql-client.js';
import { hasTable } from '../storage/read-only.js';
import { runCost, sumCosts, type RunCost } from './cost-section.js';

/** One point of the usage line. */
export interface SeriesPoint {
  position: number;
  usage: number;
}

/** A compaction on the chart: where it landed and what it did. */
export interface ChartMarker {
  position: number;
  /** Usage right after it. */
  usage: number;
  /** Usage just before it. */
  usageBefore: number;
  tier: string;
  outcome: 'completed' | 'emergency' | 'failed';
  tokensFreed: number;
  messages: number;
}

export interface ChannelReport {
  channelId: string;
  points: SeriesPoint[];
  markers: ChartMarker[];
  settings: LoggedSettings[];
  tally: CompactionTally;
  /** Entries in the channel's history at the last logged row (the x axis' end). */
  lastPosition: number;
  peakUsage: number;
}

/** One data dir (or one replay) in the report. */
export interface ReportRun {
  label: string;
  source: string;
  channels: ChannelReport[];
  total: CompactionTally;
  /** What the channel requests cost, when any were logged. */
  cost?: RunCost;
}

/** Reads a data dir's compaction log into what the report draws. */
export async function runFromDatabase(db: SqlClient, options: { label: string; source: string; channelId?: string }): Promise<ReportRun> {
  const logs = await readCompactionLog(db, options.channelId === undefined ? {} : { channelId: options.channelId });
  const channels = logs.map(channelReport);
  if (await hasTable(db, 'history_entries')) {
    // The last messages may have come after the last logged row: the axis ends at the newest.
    const count = db.prepare('SELECT COUNT(*) AS total FROM history_entries WHERE channel_id = ?');
    for (const channel of channels) channel.lastPosition = Math.max(channel.lastPosition, ((await count.get(channel.channelId)) as { total: number }).total);
  }
  const cost = await runCost(db, options.channelId);
  return { label: options.label, source: options.source, channels, total: sumTallies(channels.map((channel) => channel.tally)), ...(cost ? { cost } : {}) };
}

/**
 * One run from the runs of a deployment's stores (the `shard-<N>` dirs of a sharded bot): each
 * shard holds its own channels, so the run is their channels side by side and their totals
 * added up, as `magpie status` lists them.
 */
export function mergeRuns(parts: readonly ReportRun[], options: { label: string; source: string }): ReportRun {
  // In the order one store's log reads them (ORDER BY channel_id: code units, not the locale's).
  const channels = parts.flatMap((part) => part.channels).sort((left, right) => (left.channelId < right.channelId ? -1 : left.channelId > right.channelId ? 1 : 0));
  const cost = sumCosts(parts.map((part) => part.cost));
  return { label: options.label, source: options.source, channels, total: sumTallies(channels.map((channel) => channel.tally)), ...(cost ? { cost } : {}) };
}

/** Labels for several runs: the data dirs' names, made unique. */
export function runLabels(dataDirs: readonly string[]): string[] {
  const labels: string[] = [];
  for (const dir of dataDirs) {
    const base = basename(dir) || dir;
    let label = base;
    for (let n = 2; labels.includes(label); n += 1) label = `${base} (${n})`;
    labels.push(label);
  }
  return labels;
}

export function channelReport(log: ChannelLog): ChannelReport {
  const rows: Array<{ id: number; points: SeriesPoint[] }> = log.samples.map((sample) => ({
    id: sample.id,
    points: [{ position: sample.position, usage: sample.usage }],
  }));
  const markers: ChartMarker[] = [];
  // Markers drawn on the usage line where they happened, once the line is in order: failures,
  // and landings whose usage the log could not work out (no usage sample of the channel yet).
  const onTheLine = new Set<ChartMarker>();
  let lastPosition = 0;
  for (const sample of log.samples) lastPosition = Math.max(lastPosition, sample.position);
  for (const event of log.events) {
    lastPosition = Math.max(lastPosition, event.position);
    const before = usageBefore(event);
    const after = event.usage;
    if (event.kind === 'compaction_completed' || event.kind === 'emergency_truncation') {
      if (after !== null) {
        rows.push({ id: event.id, points: [...(before === undefined ? [] : [{ position: event.position, usage: before }]), { position: event.position, usage: after }] });
      }
      const marker: ChartMarker = {
        position: event.position,
        usage: after ?? 0,
        usageBefore: before ?? after ?? 0,
        tier: event.tier ?? 'unknown',
        outcome: event.kind === 'emergency_truncation' ? 'emergency' : 'completed',
        tokensFreed: Math.max(0, numberField(event, 'tokens_freed')),
        messages: numberField(event, event.kind === 'emergency_truncation' ? 'messages_dropped' : 'messages_compacted'),
      };
      markers.push(marker);
      if (after === null) onTheLine.add(marker);
    } else if (event.kind === 'compaction_failed') {
      const marker: ChartMarker = { position: event.position, usage: 0, usageBefore: 0, tier: event.tier ?? 'unknown', outcome: 'failed', tokensFreed: 0, messages: 0 };
      markers.push(marker);
      onTheLine.add(marker);
    } else if (event.kind === 'compaction_triggered' && after !== null) {
      rows.push({ id: event.id, points: [{ position: event.position, usage: after }] });
    }
  }
  rows.sort((a, b) => a.id - b.id);
  const points = rows.flatMap((row) => row.points);
  for (const marker of onTheLine) marker.usage = marker.usageBefore = usageAt(points, marker.position);
  const peakUsage = points.reduce((peak, point) => Math.max(peak, point.usage), 0);
  return { channelId: log.channelId, points, markers, settings: log.settings, tally: tallyLog(log), lastPosition, peakUsage };
}

function usageBefore(event: LoggedEvent): number | undefined {
  if (typeof event.data.usage_before === 'number') return event.data.usage_before;
  const { tokens_before: before, tokens_after: after } = event.data;
  if (typeof before !== 'number' || typeof after !== 'number' || after <= 0 || event.usage === null) return undefined;
  // Usage is proportional to the estimate at one moment: the same scale before and after.
  return Math.round(((event.usage * before) / after) * 10_000) / 10_000;
}

/** Usage of the last point at or before `position` (points ascend by position). */
function usageAt(points: readonly SeriesPoint[], position: number): number {
  let low = 0;
  let high = points.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (points[middle]!.position <= position) low = middle + 1;
    else high = middle;
  }
  return low > 0 ? points[low - 1]!.usage : 0;
}

function numberField(event: LoggedEvent, key: string): number {
  const value = event.data[key];
  return typeof value === 'number' ? value : 0;
}
