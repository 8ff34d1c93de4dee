import { readModelUsage, type UsageRecord } from '../compaction-log/index.js';
import type { SqlClient } from '../storage/sql-client.js';
import { escapeHtml } from './escape-html.js';

/** What the channel requests of one run cost, as the model counted them. */
export interface RunCost {
  requests: number;
  inputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  billedInputTokens: number;
  outputTokens: number;
  /** Per channel, the share of each request read from the cache, by position in its history. */
  hitRatios: Map<string, Array<{ position: number; ratio: number }>>;
}

/** The logged channel requests of a data dir, summed; undefined when none were logged. */
export async function runCost(db: SqlClient, channelId?: string): Promise<RunCost | undefined> {
  const records = await readModelUsage(db, channelId === undefined ? {} : { channelId });
  if (records.length === 0) return undefined;
  const cost: RunCost = { requests: 0, inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, billedInputTokens: 0, outputTokens: 0, hitRatios: new Map() };
  for (const record of records) add(cost, record);
  return cost;
}

function add(cost: RunCost, record: UsageRecord): void {
  cost.requests += 1;
  cost.inputTokens += record.inputTokens;
  cost.cacheReadTokens += record.cacheReadTokens;
  cost.cacheWriteTokens += record.cacheWriteTokens;
  cost.billedInputTokens += record.billedInputTokens;
  cost.outputTokens += record.outputTokens;
  const series = cost.hitRatios.get(record.channelId) ?? [];
  series.push({ position: record.position, ratio: record.inputTokens > 0 ? record.cacheReadTokens / record.inputTokens : 0 });
  cost.hitRatios.set(record.channelId, series);
}

/**
 * The report's cost section: a column per run (billed-equivalent input per reply and per
 * 1,000 messages, the cache's share), and per channel the cache hit ratio of each request over
 * the conversation, where every compaction shows as a dip (the head of the context changed).
 */
export function costSection(runs: ReadonlyArray<{ label: string; cost?: RunCost; messages: number }>): string {
  if (runs.every((run) => run.cost === undefined)) return '';
  const rows: Array<[string, (cost: RunCost, messages: number) => number]> = [
    ['model requests logged (replies)', (cost) => cost.requests],
    ['input tokens per reply', (cost) => cost.inputTokens / cost.requests],
    ['billed-equivalent input per reply', (cost) => cost.billedInputTokens / cost.requests],
    ['billed-equivalent input per 1,000 messages', (cost, messages) => (messages > 0 ? (cost.billedInputTokens * 1000) / messages : 0)],
    ['cache hit ratio (read / input)', (cost) => (cost.inputTokens > 0 ? cost.cacheReadTokens / cost.inputTokens : 0)],
    ['cache writes (tokens)', (cost) => cost.cacheWriteTokens],
    ['cache reads (tokens)', (cost) => cost.cacheReadTokens],
    ['output tokens', (cost) => cost.outputTokens],
  ];
  const head = `<tr><th></th>${runs.map((run) => `<th>${escapeHtml(run.label)}</th>`).join('')}</tr>`;
  const body = rows
    .map(([label, read]) => `<tr><th scope="row">${escapeHtml(label)}</th>${runs.map((run) => `<td>${run.cost ? format(read(run.cost, run.messages)) : '—'}</td>`).join('')}</tr>`)
    .join('');
  const channels = [...new Set(runs.flatMap((run) => [...(run.cost?.hitRatios.keys() ?? [])]))].sort();
  const charts = channels.map(
    (channelId) =>
      `<figure class="cost-chart" data-channel="${escapeHtml(channelId)}"><figcaption>Cache hit ratio of each reply in <code>${escapeHtml(channelId)}</code></figcaption>${hitRatioChart(
        runs.map((run) => ({ label: run.label, points: run.cost?.hitRatios.get(channelId) ?? [] })),
      )}</figure>`,
  );
  return `<section id="cost"><h2>What the replies cost</h2>
<p class="note">Billed-equivalent input weights the prompt cache as billed: a cache read 0.1×, a write 1.25× (2× with the one-hour lifetime), the rest 1×. A reply is a channel request the bot sent (or <code>replay --cost-replies</code> priced).</p>
<table class="numbers">${head}${body}</table>
${charts.join('\n')}
</section>`;
}

const RUN_COLOURS = ['#3b6fb6', '#d9822b', '#5a9e4b', '#8e5ab5'];

function hitRatioChart(series: ReadonlyArray<{ label: string; points: ReadonlyArray<{ position: number; ratio: number }> }>): string {
  const width = 640;
  const height = 140;
  const left = 36;
  const bottom = 20;
  const xMax = Math.max(1, ...series.flatMap((line) => line.points.map((point) => point.position)));
  const x = (position: number) => left + ((width - left - 8) * position) / xMax;
  const y = (ratio: number) => 6 + (height - bottom - 6) * (1 - ratio);
  const lines = series.map((line, index) => {
    if (line.points.length === 0) return '';
    const path = line.points.map((point, at) => `${at === 0 ? 'M' : 'L'}${x(point.position).toFixed(1)},${y(point.ratio).toFixed(1)}`).join('');
    return `<path d="${path}" fill="none" stroke="${RUN_COLOURS[index % RUN_COLOURS.length]}" stroke-width="1.5"><title>${escapeHtml(line.label)}</title></path>`;
  });
  const ticks = [0, 0.5, 1].map((ratio) => `<text class="tick" x="${left - 4}" y="${y(ratio) + 4}" text-anchor="end">${ratio * 100}%</text><path d="M${left},${y(ratio)}H${width - 8}" stroke="#eee"/>`);
  const legend = series.length > 1 ? series.map((line, index) => `<text class="tick" x="${left + 4 + index * 140}" y="${height - 4}" fill="${RUN_COLOURS[index % RUN_COLOURS.length]}">${escapeHtml(line.label)}</text>`) : [];
  return `<svg class="chart" viewBox="0 0 ${width} ${height}" role="img" aria-label="cache hit ratio per reply">${ticks.join('')}${lines.join('')}${legend.join('')}<text class="tick" x="${width - 8}" y="${height - 4}" text-anchor="end">message ${xMax.toLocaleString('en-US')}</text></svg>`;
}

function format(value: number): string {
  if (!Number.isFinite(value)) return '—';
  return value < 10 && !Number.isInteger(value) ? value.toFixed(3) : Math.round(value).toLocaleString('en-US');
}

/** The costs of several stores of one run (a sharded data dir's shards), added up. */
export function sumCosts(costs: ReadonlyArray<RunCost | undefined>): RunCost | undefined {
  const present = costs.filter((cost): cost is RunCost => cost !== undefined);
  if (present.length === 0) return undefined;
  const total: RunCost = { requests: 0, inputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, billedInputTokens: 0, outputTokens: 0, hitRatios: new Map() };
  for (const cost of present) {
    total.requests += cost.requests;
    total.inputTokens += cost.inputTokens;
    total.cacheReadTokens += cost.cacheReadTokens;
    total.cacheWriteTokens += cost.cacheWriteTokens;
    total.billedInputTokens += cost.billedInputTokens;
    total.outputTokens += cost.outputTokens;
    // A channel lives in one shard; should two hold it, its points are shown together.
    for (const [channelId, series] of cost.hitRatios) total.hitRatios.set(channelId, [...(total.hitRatios.get(channelId) ?? []), ...series]);
  }
  return total;
}
