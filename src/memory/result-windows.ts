import { ItemRows, type ItemRow, type Neighbourhood } from './item-rows.js';
import { toResult, transcriptResult } from './search-results.js';
import type { SearchResult } from './types.js';

/** A candidate in the order it is shown, with the evidence score it carries. */
export interface RankedHit {
  label: number;
  score: number;
}

export interface ResultWindowOptions {
  limit: number;
  /** Messages brought along on each side of a transcript hit. */
  neighbors: number;
  /** Most messages one transcript result may show once later hits inside it have widened it. */
  windowCap: number;
  minScore: number;
  /** Whether the caller may see this row (scope, kind and type filters). */
  admits: (row: ItemRow) => boolean | Promise<boolean>;
}

interface ShownWindow {
  row: ItemRow;
  window: ItemRow[];
  score: number;
}

/**
 * Turns ranked hits into results, each transcript hit with its neighbours. A hit that an earlier
 * result already shows is not shown again; it widens that result to its own neighbours instead
 * (up to `windowCap` messages), since two hits close together mark the part of the conversation
 * the query is about, and what follows the second (often the answer to it) is then as likely to
 * matter as what surrounds the first.
 */
export async function resultWindows(
  rows: ItemRows,
  ranked: AsyncIterable<RankedHit[]>,
  options: ResultWindowOptions,
): Promise<SearchResult[]> {
  const { limit, neighbors: radius } = options;
  const results: SearchResult[] = [];
  // Which result shows each row, and the rows each transcript result shows.
  const covered = new Map<number, number>();
  const shown = new Map<number, ShownWindow>();
  const source = ranked[Symbol.asyncIterator]();
  const eligible: RankedHit[] = [];
  let exhausted = false;
  // Results come in fused-rank order (best for recall) while each score measures evidence;
  // a running minimum keeps the scores a reader sees non-increasing down the list.
  let ceiling = 1;
  // Rows and their neighbours are read a batch at a time (usually one batch is enough).
  const batch = Math.max(16, limit * 2);
  while (results.length < limit) {
    while (!exhausted && eligible.length < batch) {
      const next = await source.next();
      if (next.done) exhausted = true;
      else eligible.push(...next.value.filter(({ score }) => score >= options.minScore));
    }
    if (eligible.length === 0) break;
    const chunk = eligible.splice(0, batch);
    const loaded = await rows.load(chunk.map(({ label }) => label));
    // Tags are hashes: a collision may bring in a row from elsewhere, which is dropped here.
    const admitted = new Map<number, ItemRow>();
    for (const row of loaded.values()) if (await options.admits(row)) admitted.set(row.rowid, row);
    // Neighbours are read only for the hits about to be shown (and those that widen a result):
    // a next round reads those of the hits that take the place of hits already shown.
    for (let position = 0; position < chunk.length && results.length < limit; ) {
      const anchors: ItemRow[] = [];
      let end = position;
      for (let count = 0; end < chunk.length && count < limit - results.length; end += 1) {
        const row = admitted.get(chunk[end]!.label);
        if (!row) continue;
        if (!covered.has(row.rowid)) count += 1;
        if (row.kind === 'transcript' && radius > 0) anchors.push(row);
      }
      const windows = await rows.neighbourhoods(anchors, radius);
      for (const { label, score: evidence } of chunk.slice(position, end)) {
        if (results.length >= limit) break;
        const row = admitted.get(label);
        if (!row) continue; // Deleted after the index saw it, or not the caller's to see.
        const around = windows.get(row.rowid);
        const holder = covered.get(row.rowid);
        if (holder !== undefined) {
          if (around) widen(shown.get(holder), holder, around, covered, results, options.windowCap);
          continue;
        }
        const score = Math.min(evidence, ceiling);
        ceiling = score;
        if (row.kind === 'transcript' && around) {
          const window = [...around.before, row, ...around.after].filter((item) => !covered.has(item.rowid));
          for (const item of window) covered.set(item.rowid, results.length);
          shown.set(results.length, { row, window, score });
          results.push(transcriptResult(row, window, score));
          continue;
        }
        covered.set(row.rowid, results.length);
        results.push(toResult(row, score));
      }
      position = end;
    }
  }
  return results;
}

/** Adds a covered hit's own neighbours that no result shows yet to the result that covers it. */
function widen(
  holder: ShownWindow | undefined,
  index: number,
  around: Neighbourhood,
  covered: Map<number, number>,
  results: SearchResult[],
  cap: number,
): void {
  if (!holder) return;
  const room = cap - holder.window.length;
  const added = [...around.before, ...around.after].filter((item) => !covered.has(item.rowid)).slice(0, Math.max(0, room));
  if (added.length === 0) return;
  for (const item of added) covered.set(item.rowid, index);
  holder.window = [...holder.window, ...added].sort((left, right) => left.created_at - right.created_at || left.rowid - right.rowid);
  results[index] = transcriptResult(holder.row, holder.window, holder.score);
}
