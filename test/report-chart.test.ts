/** The report's chart: axis titles with units, and markers that stay readable in long histories. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderChart } from '../src/report/svg-chart.js';
import type { ChartMarker } from '../src/report/report-data.js';

function markers(count: number, spacing: number): ChartMarker[] {
  return Array.from({ length: count }, (_, index) => ({
    position: (index + 1) * spacing,
    usage: 0.55,
    usageBefore: 0.8,
    tier: index % 10 === 0 ? 'aggressive' : 'background',
    outcome: 'completed' as const,
    tokensFreed: 1_000,
    messages: 12,
  }));
}

function chart(marks: ChartMarker[], xMax: number): string {
  return renderChart({ points: [{ position: 0, usage: 0 }, { position: xMax, usage: 0.6 }], markers: marks, settings: [], xMax, yMax: 1, title: 'usage' });
}

test('both axes have a title with its unit', () => {
  const svg = chart(markers(3, 100), 400);
  assert.match(svg, /class="axis">position in the conversation \(messages\)</);
  assert.match(svg, /rotate\(-90[^"]*\)" text-anchor="middle" class="axis">context usage \(% of usable window\)</);
});

test('a few hundred markers are each drawn; thousands are drawn in groups that keep every count', () => {
  const few = chart(markers(120, 10), 1_300);
  assert.equal((few.match(/<g class="marker"/g) ?? []).length, 120, 'one marker per compaction');
  assert.doesNotMatch(few, /marker-group/);

  const many = markers(3_000, 2);
  const svg = chart(many, 6_100);
  const singles = (svg.match(/<g class="marker"/g) ?? []).length;
  const groups = [...svg.matchAll(/<g class="marker-group" data-tier="(\w+)" data-outcome="\w+" data-count="(\d+)">/g)];
  assert.ok(groups.length > 0, 'neighbours are grouped');
  assert.ok(singles + groups.length <= 400, `few enough to read: ${singles + groups.length} marks`);
  assert.equal(singles + groups.reduce((sum, group) => sum + Number(group[2]), 0), 3_000, 'every compaction is counted once');
  const aggressive = groups.filter((group) => group[1] === 'aggressive').reduce((sum, group) => sum + Number(group[2]), 0);
  assert.equal(aggressive + (svg.match(/<g class="marker" data-tier="aggressive"/g) ?? []).length, 300, 'tiers are never merged');
  assert.match(svg, /<title>\d+ background compactions between messages \d+ and \d+: [\d,]+ tokens freed in all<\/title>/);
  assert.match(svg, /3,000 markers; neighbours of one kind drawn as one, with their count/);
});
