import type { CompactionTally } from '../compaction-log/index.js';
import type { ChannelReport, ReportRun } from './report-data.js';
import { escapeHtml } from './escape-html.js';
import { renderChart, TIER_COLOURS } from './svg-chart.js';
import { costSection } from './cost-section.js';

/** The rows of every tally table: label and how to read the number from a tally. */
const TALLY_ROWS: ReadonlyArray<[string, (tally: CompactionTally) => number]> = [
  ['background compactions triggered', (t) => t.triggered.background],
  ['aggressive compactions triggered', (t) => t.triggered.aggressive],
  ['manual compactions (/compact)', (t) => t.triggered.manual],
  ['emergency truncations', (t) => t.emergencies],
  ['summaries written', (t) => t.summaries],
  ['messages summarized', (t) => t.messagesSummarized],
  ['messages cut by emergency truncation', (t) => t.messagesTruncated],
  ['memories saved', (t) => t.memoriesSaved],
  ['tokens freed (total)', (t) => t.tokensFreed],
  ['tokens freed by background', (t) => t.tokensFreedByTier.background],
  ['tokens freed by aggressive', (t) => t.tokensFreedByTier.aggressive],
  ['tokens freed by emergency', (t) => t.tokensFreedByTier.emergency],
  ['workers failed', (t) => t.failed],
  ['workers re-planned', (t) => t.replanned],
];

const SETTING_KEYS = [
  'context_window',
  'max_response_tokens',
  'background_threshold',
  'aggressive_threshold',
  'emergency_threshold',
  'background_fraction',
  'aggressive_fraction',
  'emergency_fraction',
  'rollup_threshold',
  'summary_max_tokens',
  'max_worker_turns',
  'fallback_after_failures',
];

export interface RenderOptions {
  /** When the report was made (shown in the header). */
  generatedAt: Date;
}

/**
 * The tuning report: one self-contained HTML file (inline CSS and SVG, no script, nothing
 * fetched). With several runs, every table has a column per run and every channel a chart per
 * run on the same axes, so two settings can be compared at a glance.
 */
export function renderReport(runs: readonly ReportRun[], options: RenderOptions): string {
  const channelIds = [...new Set(runs.flatMap((run) => run.channels.map((channel) => channel.channelId)))].sort();
  const body = [
    '<h1>Magpie compaction report</h1>',
    `<p class="meta">Generated ${escapeHtml(options.generatedAt.toISOString())} from ${runs
      .map((run) => `<b>${escapeHtml(run.label)}</b> (<code>${escapeHtml(run.source)}</code>)`)
      .join(runs.length === 2 ? ' compared with ' : ', ')}.</p>`,
    overview(runs),
    costSection(runs.map((run) => ({ label: run.label, messages: run.channels.reduce((sum, channel) => sum + channel.lastPosition, 0), ...(run.cost ? { cost: run.cost } : {}) }))),
    ...channelIds.map((channelId) => channelSection(channelId, runs)),
    READING_GUIDE,
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Magpie compaction report</title>
<style>${STYLE}</style></head>
<body>
${body.join('\n')}
</body></html>
`;
}

function overview(runs: readonly ReportRun[]): string {
  const messages = (run: ReportRun) => run.channels.reduce((sum, channel) => sum + channel.lastPosition, 0);
  const rows: Array<[string, (run: ReportRun) => number]> = [
    ['channels', (run) => run.channels.length],
    ['messages (entries in history)', messages],
    ...TALLY_ROWS.map(([label, read]) => [label, (run: ReportRun) => read(run.total)] as [string, (run: ReportRun) => number]),
  ];
  const empty = runs.filter((run) => run.channels.length === 0);
  const note =
    empty.length === 0
      ? ''
      : `<p class="note">No compaction log in ${empty.map((run) => `<b>${escapeHtml(run.label)}</b>`).join(', ')}: nothing was logged yet, or the data was written by a version without the log.</p>`;
  return `<section id="overview"><h2>All channels</h2>${note}${numberTable(runs, rows)}</section>`;
}

function channelSection(channelId: string, runs: readonly ReportRun[]): string {
  const reports = runs.map((run) => run.channels.find((channel) => channel.channelId === channelId));
  const xMax = Math.max(1, ...reports.map((report) => report?.lastPosition ?? 0));
  const yMax = Math.max(1, ...reports.map((report) => report?.peakUsage ?? 0)) * 1.02;
  const charts = runs.map((run, index) => {
    const report = reports[index];
    const caption = runs.length > 1 ? `<figcaption>${escapeHtml(run.label)}</figcaption>` : '';
    if (!report) return `<figure class="run-chart" data-run="${escapeHtml(run.label)}">${caption}<p class="note">No log for this channel.</p></figure>`;
    const chart = renderChart({ points: report.points, markers: report.markers, settings: report.settings, xMax, yMax, title: `Context usage of ${channelId} (${run.label})` });
    return `<figure class="run-chart" data-run="${escapeHtml(run.label)}" data-markers="${report.markers.filter((marker) => marker.outcome !== 'failed').length}">${caption}${chart}</figure>`;
  });
  const tallyRows: Array<[string, (run: ReportRun) => number]> = [
    ['messages (entries in history)', (run) => channelOf(run, channelId)?.lastPosition ?? 0],
    ['peak usage (%)', (run) => Math.round((channelOf(run, channelId)?.peakUsage ?? 0) * 1000) / 10],
    ...TALLY_ROWS.map(([label, read]) => [label, (run: ReportRun) => {
      const channel = channelOf(run, channelId);
      return channel ? read(channel.tally) : 0;
    }] as [string, (run: ReportRun) => number]),
  ];
  return `<section class="channel" data-channel="${escapeHtml(channelId)}">
<h2>Channel <code>${escapeHtml(channelId)}</code></h2>
${charts.join('\n')}
${LEGEND}
<div class="tables"><div><h3>What compaction did</h3>${numberTable(runs, tallyRows)}</div>
<div><h3>Settings in force</h3>${settingsTable(runs, reports)}</div></div>
</section>`;
}

function channelOf(run: ReportRun, channelId: string): ChannelReport | undefined {
  return run.channels.find((channel) => channel.channelId === channelId);
}

/** A table with a column per run, and a difference column when there are exactly two. */
function numberTable(runs: readonly ReportRun[], rows: ReadonlyArray<[string, (run: ReportRun) => number]>): string {
  const compare = runs.length === 2;
  const head = `<tr><th></th>${runs.map((run) => `<th>${escapeHtml(run.label)}</th>`).join('')}${compare ? '<th>difference</th>' : ''}</tr>`;
  const body = rows.map(([label, read]) => {
    const values = runs.map(read);
    const difference = compare ? values[1]! - values[0]! : 0;
    const cells = values.map((value) => `<td>${formatNumber(value)}</td>`).join('');
    const diffCell = compare ? `<td class="${difference === 0 ? 'same' : 'diff'}">${difference > 0 ? '+' : ''}${formatNumber(difference)}</td>` : '';
    return `<tr><th scope="row">${escapeHtml(label)}</th>${cells}${diffCell}</tr>`;
  });
  // Said where the column is, not only in the notes at the bottom of the page.
  const caption = compare ? `<caption class="difference">difference = ${escapeHtml(runs[1]!.label)} − ${escapeHtml(runs[0]!.label)} (second run minus first)</caption>` : '';
  return `<table class="numbers">${caption}${head}${body.join('')}</table>`;
}

function settingsTable(runs: readonly ReportRun[], reports: ReadonlyArray<ChannelReport | undefined>): string {
  const head = `<tr><th></th>${runs.map((run) => `<th>${escapeHtml(run.label)}</th>`).join('')}</tr>`;
  const rows = SETTING_KEYS.map((key) => {
    const cells = reports.map((report) => {
      if (!report || report.settings.length === 0) return '—';
      const values = report.settings.map((row) => row.values[key]);
      const distinct = [...new Set(values)];
      if (distinct.length === 1) return formatNumber(distinct[0] ?? Number.NaN);
      // Hot reload changed it mid-way: every value with the message it applied from.
      return report.settings.map((row) => `${formatNumber(row.values[key] ?? Number.NaN)} from message ${row.position}`).join('<br>');
    });
    const differs = new Set(cells).size > 1;
    return `<tr${differs ? ' class="differs"' : ''}><th scope="row"><code>${key}</code></th>${cells.map((cell) => `<td>${cell}</td>`).join('')}</tr>`;
  });
  return `<table class="settings">${head}${rows.join('')}</table>`;
}

function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return '—';
  return Number.isInteger(value) ? value.toLocaleString('en-US') : String(Math.round(value * 1000) / 1000);
}

const swatch = (tier: string, shape: 'circle' | 'triangle' | 'line' | 'cross') => {
  const colour = TIER_COLOURS[tier];
  const svg =
    shape === 'circle'
      ? `<circle cx="7" cy="7" r="4" fill="${colour}"/>`
      : shape === 'triangle'
        ? `<path d="M7,2l5,9h-10z" fill="${colour}"/>`
        : shape === 'cross'
          ? `<path d="M3,3l8,8m0,-8l-8,8" stroke="${colour}" stroke-width="2"/>`
          : `<path d="M0,7H14" stroke="${colour}" stroke-dasharray="4 3" stroke-width="1.5"/>`;
  return `<svg width="14" height="14" aria-hidden="true">${svg}</svg>`;
};

const LEGEND = `<p class="legend">
<span>${swatch('background', 'circle')} background compaction</span>
<span>${swatch('aggressive', 'circle')} aggressive compaction</span>
<span>${swatch('manual', 'circle')} manual (/compact)</span>
<span>${swatch('emergency', 'triangle')} emergency truncation</span>
<span>${swatch('unknown', 'cross')} failed worker</span>
<span>${swatch('background', 'line')}${swatch('aggressive', 'line')}${swatch('emergency', 'line')} thresholds</span>
</p>`;

const READING_GUIDE = `<section id="reading"><h2>How to read this report</h2>
<ul>
<li>The grey line is the channel's context usage (estimated tokens over the window) after each message. It climbs as people talk and drops where compaction took the oldest messages out of the live context.</li>
<li>A dot marks a worker's summary landing, coloured by the tier that started it; a triangle marks an emergency truncation (the oldest messages cut at once, without a summary; they stay in the archive and in <code>memory_search</code>). Hover a marker for the usage before and after and the tokens freed.</li>
<li>A healthy channel is a saw-tooth between the background threshold and well below it, with blue dots only. Orange dots mean usage kept rising while a worker ran; red triangles mean workers are slower than the conversation (or the window is too small for the prompt and summaries): lower the thresholds, raise the fractions, or give workers more room.</li>
<li>With two runs, every number has a difference column (second minus first) and the settings that differ are highlighted.</li>
<li>Past 300 compactions on one chart, neighbouring markers of one tier are drawn as one, with their count; its tooltip sums them.</li>
</ul></section>`;

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto; max-width: 1000px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; } h3 { font-size: 15px; margin: 12px 0 6px; }
.meta, .note { color: #555; } code { font-size: 13px; }
figure { margin: 8px 0; } figcaption { font-weight: 600; margin-bottom: 2px; }
svg.chart { max-width: 100%; height: auto; } svg .tick { font-size: 11px; fill: #555; } svg .axis { font-size: 12px; fill: #333; } svg .count { font-size: 9px; fill: #fff; font-weight: 600; } caption.difference { caption-side: bottom; text-align: left; font-size: 12px; color: #555; }
svg .marker { cursor: default; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; font-size: 12px; color: #444; } .legend svg { vertical-align: -2px; margin-right: 3px; }
.tables { display: flex; flex-wrap: wrap; gap: 24px; }
table { border-collapse: collapse; font-size: 13px; } th, td { padding: 3px 8px; border-bottom: 1px solid #eee; } td { text-align: right; font-variant-numeric: tabular-nums; }
th[scope=row] { text-align: left; font-weight: normal; } td.diff { font-weight: 600; } td.same { color: #999; } tr.differs { background: #fff6d6; }
`;
