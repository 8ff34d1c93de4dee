import type { ChartMarker } from './report-data.js';

/** Beyond this many markers on one chart, neighbours are drawn as one marker with a count. */
export const MAX_SEPARATE_MARKERS = 300;
/** Width of the strip of the plot whose markers of one kind become one group. */
const GROUP_PIXELS = 8;

/** Markers of one tier and outcome that fell in one strip of the plot. */
export interface MarkerGroup {
  tier: string;
  outcome: ChartMarker['outcome'];
  markers: ChartMarker[];
  /** Where the group is drawn: the mean position and usage of its markers. */
  position: number;
  usage: number;
}

/**
 * Groups markers so that a chart of thousands of compactions stays readable: below
 * MAX_SEPARATE_MARKERS each marker is its own group; above, markers of the same tier and
 * outcome within GROUP_PIXELS of plot width are one group, drawn once with their count.
 */
export function groupMarkers(markers: readonly ChartMarker[], pixelOf: (position: number) => number): MarkerGroup[] {
  if (markers.length <= MAX_SEPARATE_MARKERS) return markers.map((marker) => single(marker));
  const groups = new Map<string, ChartMarker[]>();
  for (const marker of markers) {
    const key = `${marker.tier}|${marker.outcome}|${Math.floor(pixelOf(marker.position) / GROUP_PIXELS)}`;
    const members = groups.get(key);
    if (members) members.push(marker);
    else groups.set(key, [marker]);
  }
  return [...groups.values()].map((members) =>
    members.length === 1
      ? single(members[0]!)
      : {
          tier: members[0]!.tier,
          outcome: members[0]!.outcome,
          markers: members,
          position: mean(members.map((marker) => marker.position)),
          usage: mean(members.map((marker) => marker.usage)),
        },
  );
}

function single(marker: ChartMarker): MarkerGroup {
  return { tier: marker.tier, outcome: marker.outcome, markers: [marker], position: marker.position, usage: marker.usage };
}

function mean(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}
