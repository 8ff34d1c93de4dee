/** The tuning report: a self-contained HTML file drawn from the compaction log. */
export { channelReport, mergeRuns, runFromDatabase, runLabels, type ChannelReport, type ChartMarker, type ReportRun, type SeriesPoint } from './report-data.js';
export { renderReport, type RenderOptions } from './render-html.js';
export { renderChart, TIER_COLOURS } from './svg-chart.js';
