/**
 * How long the event loop stands still while an index file is written or read: a delete in a
 * channel of 100,000 messages rewrites its index file (about 120 MB), and the first search after
 * a start loads and checks it. Each stall is set against the operation's own wall time (a stall
 * as long as the operation means it ran on the event loop) and against the stall of an idle
 * wait as long, measured in the same run (the machine's scheduling alone). Reading SQLite
 * stays on the event loop (better-sqlite3 is synchronous): a first search's cold full-text read
 * is part of its stall.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { SqlMemoryStore } from '../src/memory/index.js';
import { median, type BenchMetric } from './harness.js';

/** The longest event-loop delay while `work` runs, and its wall time, in ms. */
export async function stallDuring(work: () => Promise<unknown>): Promise<{ stallMs: number; wallMs: number }> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  // The histogram measures the gap between two of its timer's ticks: a stall before the first
  // tick would go unseen.
  await new Promise((resolve) => setTimeout(resolve, 10));
  const started = performance.now();
  await work();
  const wallMs = performance.now() - started;
  // One more turn of the loop, so a stall at the very end is counted.
  await new Promise((resolve) => setTimeout(resolve, 5));
  delay.disable();
  return { stallMs: delay.max / 1e6, wallMs };
}

/** Deletes one message at a time (each rewrites the channel's index file). */
export async function deleteStalls(store: SqlMemoryStore, channelId: string, messageIds: readonly string[]): Promise<BenchMetric[]> {
  const stalls: number[] = [];
  const walls: number[] = [];
  for (const messageId of messageIds) {
    const { stallMs, wallMs } = await stallDuring(() => store.deleteTranscript(channelId, [messageId]));
    stalls.push(stallMs);
    walls.push(wallMs);
  }
  // The same wait with nothing to do: what the machine's own scheduling costs the loop.
  const idle = await stallDuring(() => new Promise((resolve) => setTimeout(resolve, median(walls))));
  return [
    { name: `delete of one message at 100,000 entries, median of ${messageIds.length} (index file rewritten)`, value: median(walls), unit: 'ms' },
    { name: 'longest event-loop stall during that delete, median', value: median(stalls), unit: 'ms' },
    { name: 'reference: longest stall while idle as long', value: idle.stallMs, unit: 'ms' },
    { name: 'stall / delete time (1 = all of it on the event loop)', value: median(stalls) / median(walls), unit: 'x' },
  ];
}

/** Edits one message at a time: each takes the old vector out of the index file at once, as a delete does. */
export async function editStalls(store: SqlMemoryStore, channelId: string, messageIds: readonly string[]): Promise<BenchMetric[]> {
  const stalls: number[] = [];
  const walls: number[] = [];
  for (const messageId of messageIds) {
    const content = `edited: the meeting about ${messageId} moved to thursday`;
    const { stallMs, wallMs } = await stallDuring(() => store.updateTranscript(channelId, [{ messageId, content }]));
    stalls.push(stallMs);
    walls.push(wallMs);
  }
  return [
    { name: `edit of one message at 100,000 entries, median of ${messageIds.length} (old vector out of the index file)`, value: median(walls), unit: 'ms' },
    { name: 'longest event-loop stall during that edit, median', value: median(stalls), unit: 'ms' },
    { name: 'stall / edit time', value: median(stalls) / median(walls), unit: 'x' },
  ];
}

/** The first search after a start, which loads the channel's index file and checks it. */
export async function firstSearchStall(store: SqlMemoryStore, channelId: string): Promise<BenchMetric[]> {
  const { stallMs, wallMs } = await stallDuring(() => store.search({ location: { channelId }, query: 'server budget meeting' }));
  return [
    { name: 'first search after a start (loads and checks the 100,000-entry index file)', value: wallMs, unit: 'ms' },
    { name: 'longest event-loop stall during it', value: stallMs, unit: 'ms' },
    { name: 'stall / first search time', value: stallMs / wallMs, unit: 'x' },
  ];
}
