import type { LoggedSettings } from '../compaction-log/index.js';
import type { ChartMarker, SeriesPoint } from './report-data.js';
import { escapeHtml } from './escape-html.js';
import { groupMarkers, type MarkerGroup } from './marker-groups.js';

/** Tier colours, shared by markers, threshold lines and legends. */
export const TIER_COLOURS: Readonly<Record<string, string>> = {
  background: '#1f77b4',
  aggressive: '#e6850e',
  emergency: '#d62728',
  manual: '#8e5cc2',
  unknown: '#777777',
};

const WIDTH = 880;
const HEIGHT = 250;
const MARGIN = { left: 66, right: 112, top: 14, bottom: 34 };
/** More points than this are thinned to the lowest and highest per pixel column. */
const MAX_POINTS = 2 * (WIDTH - MARGIN.left - MARGIN.right);

export interface ChartInput {
  points: readonly SeriesPoint[];
  markers: readonly ChartMarker[];
  settings: readonly LoggedSettings[];
  /** Shared axes, so charts of runs being compared line up. */
  xMax: number;
  yMax: number;
  title: string;
}

/**
 * An inline SVG chart of context usage over the conversation: the usage line, the three
 * thresholds (as step lines when hot reload changed them), and one marker per compaction,
 * coloured by tier. Markers carry `class="marker"` and `data-tier`, with a `<title>` tooltip;
 * past a few hundred, neighbours of one kind are one `class="marker-group"` with `data-count`.
 */
export function renderChart(input: ChartInput): string {
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const xMax = Math.max(input.xMax, 1);
  const yMax = Math.max(input.yMax, 0.01);
  const x = (position: number) => MARGIN.left + (position / xMax) * plotWidth;
  const y = (usage: number) => MARGIN.top + plotHeight - (Math.min(usage, yMax) / yMax) * plotHeight;
  const parts: string[] = [];
  parts.push(
    `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${WIDTH} ${HEIGHT}" width="${WIDTH}" height="${HEIGHT}" role="img" aria-label="${escapeHtml(input.title)}">`,
  );
  parts.push(`<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotWidth}" height="${plotHeight}" fill="#fbfbfb" stroke="#ddd"/>`);
  for (const tick of yTicks(yMax)) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${MARGIN.left + plotWidth}" y1="${f(y(tick))}" y2="${f(y(tick))}" stroke="#eee"/>`,
      `<text x="${MARGIN.left - 6}" y="${f(y(tick) + 4)}" text-anchor="end" class="tick">${Math.round(tick * 100)}%</text>`,
    );
  }
  for (const tick of xTicks(xMax)) {
    parts.push(
      `<line x1="${f(x(tick))}" x2="${f(x(tick))}" y1="${MARGIN.top + plotHeight}" y2="${MARGIN.top + plotHeight + 4}" stroke="#999"/>`,
      `<text x="${f(x(tick))}" y="${MARGIN.top + plotHeight + 17}" text-anchor="middle" class="tick">${tick.toLocaleString('en-US')}</text>`,
    );
  }
  parts.push(`<text x="${MARGIN.left + plotWidth / 2}" y="${HEIGHT - 3}" text-anchor="middle" class="axis">position in the conversation (messages)</text>`);
  const middle = MARGIN.top + plotHeight / 2;
  parts.push(`<text x="13" y="${f(middle)}" transform="rotate(-90 13 ${f(middle)})" text-anchor="middle" class="axis">context usage (% of usable window)</text>`);
  parts.push(thresholdLines(input.settings, xMax, x, y, MARGIN.left + plotWidth));
  const line = thin(input.points, xMax, plotWidth);
  if (line.length > 0) {
    const path = line.map((point, index) => `${index === 0 ? 'M' : 'L'}${f(x(point.position))},${f(y(point.usage))}`).join('');
    parts.push(`<path class="usage" d="${path}" fill="none" stroke="#3a3a3a" stroke-width="1.2"/>`);
  }
  const groups = groupMarkers(input.markers, x);
  for (const group of groups) parts.push(group.markers.length === 1 ? renderMarker(group.markers[0]!, x, y) : renderGroup(group, x, y));
  if (groups.length < input.markers.length) {
    parts.push(`<text x="${MARGIN.left + plotWidth}" y="${MARGIN.top - 3}" text-anchor="end" class="tick">${input.markers.length.toLocaleString('en-US')} markers; neighbours of one kind drawn as one, with their count</text>`);
  }
  parts.push('</svg>');
  return parts.join('');
}

function renderMarker(marker: ChartMarker, x: (value: number) => number, y: (value: number) => number): string {
  const colour = TIER_COLOURS[marker.tier] ?? TIER_COLOURS.unknown;
  const cx = f(x(marker.position));
  const cy = f(y(marker.usage));
  if (marker.outcome === 'failed') {
    const title = `${marker.tier} compaction failed at message ${marker.position}`;
    return `<path class="failure" data-tier="${escapeHtml(marker.tier)}" d="M${f(x(marker.position) - 4)},${f(y(marker.usage) - 4)}l8,8m0,-8l-8,8" stroke="${colour}" stroke-width="2"><title>${escapeHtml(title)}</title></path>`;
  }
  const what = marker.outcome === 'emergency' ? 'emergency truncation' : `${marker.tier} compaction`;
  const title =
    `${what} at message ${marker.position}: ${percent(marker.usageBefore)} → ${percent(marker.usage)}, ` +
    `${marker.tokensFreed.toLocaleString('en-US')} tokens freed, ${marker.messages} messages`;
  const shape =
    marker.outcome === 'emergency'
      ? `<path d="M${cx},${f(y(marker.usage) - 6)}l5,9h-10z" fill="${colour}"/>`
      : `<circle cx="${cx}" cy="${cy}" r="4" fill="${colour}"/>`;
  return `<g class="marker" data-tier="${escapeHtml(marker.tier)}" data-outcome="${marker.outcome}"><title>${escapeHtml(title)}</title>${shape}</g>`;
}

/** Neighbouring markers of one kind as one: a larger mark with the count, the sums in its tooltip. */
function renderGroup(group: MarkerGroup, x: (value: number) => number, y: (value: number) => number): string {
  const colour = TIER_COLOURS[group.tier] ?? TIER_COLOURS.unknown;
  const count = group.markers.length;
  const first = Math.min(...group.markers.map((marker) => marker.position));
  const last = Math.max(...group.markers.map((marker) => marker.position));
  const freed = group.markers.reduce((sum, marker) => sum + marker.tokensFreed, 0);
  const what = group.outcome === 'failed' ? `failed ${group.tier} compactions` : group.outcome === 'emergency' ? 'emergency truncations' : `${group.tier} compactions`;
  const title = `${count} ${what} between messages ${first} and ${last}` + (group.outcome === 'failed' ? '' : `: ${freed.toLocaleString('en-US')} tokens freed in all`);
  const cx = f(x(group.position));
  const cy = f(y(group.usage));
  return (
    `<g class="marker-group" data-tier="${escapeHtml(group.tier)}" data-outcome="${group.outcome}" data-count="${count}"><title>${escapeHtml(title)}</title>` +
    `<circle cx="${cx}" cy="${cy}" r="7" fill="${colour}" fill-opacity="0.85"/>` +
    `<text x="${cx}" y="${f(y(group.usage) + 3)}" text-anchor="middle" class="count">${count > 99 ? '99+' : count}</text></g>`
  );
}

/** The three thresholds, one dashed step line each, labelled at the right edge. */
function thresholdLines(
  settings: readonly LoggedSettings[],
  xMax: number,
  x: (value: number) => number,
  y: (value: number) => number,
  right: number,
): string {
  if (settings.length === 0) return '';
  const parts: string[] = [];
  let labelAbove = Number.NEGATIVE_INFINITY;
  for (const tier of ['emergency', 'aggressive', 'background'] as const) {
    const key = `${tier}_threshold`;
    let path = '';
    settings.forEach((row, index) => {
      const value = row.values[key];
      if (typeof value !== 'number') return;
      const from = index === 0 ? 0 : row.position;
      const to = settings[index + 1]?.position ?? xMax;
      path += `M${f(x(from))},${f(y(value))}H${f(x(Math.max(to, from)))}`;
    });
    const last = settings.at(-1)!.values[key];
    parts.push(`<path class="threshold" data-tier="${tier}" d="${path}" stroke="${TIER_COLOURS[tier]}" stroke-dasharray="5 4" stroke-width="1.2" fill="none"/>`);
    if (typeof last === 'number') {
      // Close thresholds would print their labels on top of each other: keep them 11 px apart.
      const labelY = Math.max(y(last) + 4, labelAbove + 11);
      labelAbove = labelY;
      parts.push(`<text x="${right + 6}" y="${f(labelY)}" class="tick" fill="${TIER_COLOURS[tier]}">${tier} ${percent(last)}</text>`);
    }
  }
  return parts.join('');
}

/** Keeps the shape of a long line: per pixel column, its lowest and highest point, in order. */
function thin(points: readonly SeriesPoint[], xMax: number, plotWidth: number): SeriesPoint[] {
  if (points.length <= MAX_POINTS) return [...points];
  const columns = new Map<number, { low: SeriesPoint; high: SeriesPoint; lowAt: number; highAt: number }>();
  points.forEach((point, index) => {
    const column = Math.floor((point.position / xMax) * plotWidth);
    const seen = columns.get(column);
    if (!seen) columns.set(column, { low: point, high: point, lowAt: index, highAt: index });
    else {
      if (point.usage < seen.low.usage) Object.assign(seen, { low: point, lowAt: index });
      if (point.usage > seen.high.usage) Object.assign(seen, { high: point, highAt: index });
    }
  });
  const kept: Array<{ point: SeriesPoint; at: number }> = [];
  for (const column of columns.values()) {
    kept.push({ point: column.low, at: column.lowAt });
    if (column.highAt !== column.lowAt) kept.push({ point: column.high, at: column.highAt });
  }
  return kept.sort((a, b) => a.at - b.at).map((entry) => entry.point);
}

function yTicks(yMax: number): number[] {
  const step = yMax > 1.2 ? 0.5 : 0.25;
  const ticks: number[] = [];
  for (let tick = 0; tick <= yMax + 1e-9; tick += step) ticks.push(Math.round(tick * 100) / 100);
  return ticks;
}

function xTicks(xMax: number): number[] {
  const rough = xMax / 6;
  const magnitude = 10 ** Math.floor(Math.log10(Math.max(rough, 1)));
  const step = [1, 2, 5, 10].map((factor) => factor * magnitude).find((candidate) => candidate >= rough) ?? magnitude * 10;
  const ticks: number[] = [];
  for (let tick = 0; tick <= xMax; tick += step) ticks.push(tick);
  return ticks;
}

function percent(value: number): string {
  return `${Math.round(value * 1000) / 10}%`;
}

function f(value: number): string {
  return (Math.round(value * 10) / 10).toString();
}
