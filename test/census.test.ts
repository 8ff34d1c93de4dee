/**
 * Where a channel's messages are (`magpie status`, the replay summary): live, read by a
 * summarizer and under a summary, or cut by emergency truncation and behind a marker. A roll-up
 * that folds a truncation marker spans the marker's messages, which no summarizer ever read:
 * they still count as cut. Real history store, both backends.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { contextCensus } from '../src/channel/census.js';
import { HistoryStore } from '../src/channel/history-store.js';
import type { HistoryEntry } from '../src/context/types.js';
import { openTestDatabase } from './support/storage.js';

function message(seq: number): HistoryEntry {
  return { seq, channelId: 'c', messageId: `m${seq}`, kind: 'message', role: 'user', authorId: 'u', authorName: 'Ana', content: `message ${seq}`, createdAt: seq, tokens: 5, turnId: seq };
}

async function withStore(work: (store: HistoryStore, census: () => ReturnType<typeof contextCensus>) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-census-'));
  const db = await openTestDatabase(dir);
  try {
    const store = new HistoryStore(db);
    for (let seq = 1; seq <= 20; seq += 1) await store.insert(message(seq), {});
    await work(store, () => contextCensus(db, 'c'));
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const summaryText = (fromSeq: number, toSeq: number) => ({ channelId: 'c', fromSeq, toSeq, content: 'text', tokens: 3, createdAt: 0 });

test('a roll-up folding a truncation marker: the messages behind the marker still count as cut, the ones it read as summarized', async () => {
  await withStore(async (store, census) => {
    // Messages 1-5 cut by an emergency, then a roll-up folds the marker and reads 6-10.
    const marker = await store.truncate('c', { toSeq: 5 }, { ...summaryText(1, 5), kind: 'marker' });
    await store.splice({ channelId: 'c', entryRange: { toSeq: 10 }, retiredSummaryIds: [marker], summary: { ...summaryText(1, 10), kind: 'summary', summarizer: 'extractive', readFromSeq: 6 } });
    const counted = await census();
    assert.deepEqual({ live: counted.liveMessages, summarized: counted.underSummaries, cut: counted.underMarkers }, { live: 10, summarized: 5, cut: 5 });
    assert.equal(counted.liveMessages + counted.underSummaries + counted.underMarkers, counted.messages);

    // A later roll-up of that summary with 11-15: what the first read stays summarized, the cut stays cut.
    const [first] = (await store.allSummaries('c')).filter((summary) => summary.live);
    await store.splice({ channelId: 'c', entryRange: { toSeq: 15 }, retiredSummaryIds: [first!.id], summary: { ...summaryText(1, 15), kind: 'summary', summarizer: 'extractive', readFromSeq: 11 } });
    const again = await census();
    assert.deepEqual({ live: again.liveMessages, summarized: again.underSummaries, cut: again.underMarkers }, { live: 5, summarized: 10, cut: 5 });
  });
});

test('a summary landing in place of a marker read what the marker stood for: summarized', async () => {
  await withStore(async (store, census) => {
    const marker = await store.truncate('c', { toSeq: 5 }, { ...summaryText(1, 5), kind: 'marker' });
    await store.splice({ channelId: 'c', retiredSummaryIds: [marker], summary: { ...summaryText(1, 5), kind: 'summary', summarizer: 'extractive', readFromSeq: 1 } });
    const counted = await census();
    assert.deepEqual({ live: counted.liveMessages, summarized: counted.underSummaries, cut: counted.underMarkers }, { live: 15, summarized: 5, cut: 0 });
  });
});
