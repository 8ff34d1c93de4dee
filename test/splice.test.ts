/**
 * Where a worker's summary lands when an emergency cut overtook it and its plan held messages
 * back (their replies lay past its cut): the real planner, truncation and splice on one
 * channel's state, with the database writes recorded.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelState } from '../src/context/channel-state.js';
import type { SpliceChange, SummaryWrites } from '../src/context/history-store.js';
import type { HistoryEntry } from '../src/context/types.js';
import { EventStream } from '../src/common/events.js';
import { truncateInPlace } from '../src/compaction/emergency-truncation.js';
import { markerCount } from '../src/compaction/emergency.js';
import { planCompaction, type CompactionPlan } from '../src/compaction/planner.js';
import { applySplice, matchSnapshot } from '../src/compaction/splice.js';
import { DEFAULTS } from '../src/config/defaults.js';

class RecordedWrites implements SummaryWrites {
  readonly splices: SpliceChange[] = [];
  private nextId = 1;
  async splice(change: SpliceChange): Promise<number> {
    this.splices.push(change);
    return this.nextId++;
  }
  async truncate(): Promise<number> {
    return this.nextId++;
  }
  async extendMarker(): Promise<void> {}
}

/**
 * A busy channel: the bot answers one message at a time; while it writes, someone else talks
 * and the next question comes in, so each reply lands after the next question and turns overlap
 * in a chain with no boundary.
 */
class BusyChannel {
  readonly state = new ChannelState('c', { entries: [], summaries: [], nextSeq: 1, nextTurnId: 1, archivedCount: 0, location: {} });
  readonly store = new RecordedWrites();
  private question: HistoryEntry;

  constructor(rounds: number) {
    this.question = this.append('user');
    this.talk(rounds);
  }

  talk(rounds: number): void {
    for (let round = 0; round < rounds; round += 1) {
      this.append('user');
      const following = this.append('user');
      this.append('assistant', this.question.turnId);
      this.question = following;
    }
  }

  /** A worker takes `fraction` of the live entries; it stays in flight (no marker grows meanwhile). */
  plan(fraction: number): CompactionPlan {
    const plan = planCompaction({ entries: this.state.entries, summaries: [], summaryTokens: 0, fraction, rollupTokens: Infinity })!;
    this.state.compaction = { compactionId: 'c/1', tier: 'background', abort: new AbortController() };
    return plan;
  }

  /** An emergency cut of the oldest `count` live entries (through the turns: none ends there). */
  async truncate(count: number): Promise<void> {
    const { state } = this;
    const settings = { ...DEFAULTS.defaults, compaction: { ...DEFAULTS.defaults.compaction, emergencyFraction: (count - 0.5) / state.entries.length } };
    const context = { store: this.store, events: new EventStream(), clock: { now: () => 0 }, retryFailedArchives: () => true as const, estimate: () => state.entryTokens + state.summaryTokens };
    assert.ok(truncateInPlace(context, state, settings, { tokensBefore: state.entryTokens + state.summaryTokens }));
    await state.truncationWritten;
  }

  /** Every entry is in exactly one place: live, under the new summary (read) or behind a marker. */
  assertEachOnce(all: readonly HistoryEntry[], read: readonly HistoryEntry[]): void {
    const { state } = this;
    const behind = state.summaries.filter((summary) => summary.kind === 'marker').flatMap((marker) => state.markerEntries.get(marker.id)!);
    const places = [...state.entries, ...read, ...behind];
    assert.equal(places.length, all.length, 'no entry twice');
    assert.deepEqual(new Set(places), new Set(all), 'no entry lost');
    for (const marker of state.summaries.filter((summary) => summary.kind === 'marker')) {
      assert.equal(markerCount(marker.content), state.markerEntries.get(marker.id)!.length, 'a marker counts what it stands for');
    }
  }

  private append(role: HistoryEntry['role'], turnId?: number): HistoryEntry {
    const { state } = this;
    const seq = state.nextSeq++;
    const entry: HistoryEntry = {
      seq,
      channelId: 'c',
      messageId: `m${seq}`,
      kind: 'message',
      role,
      authorId: role,
      authorName: role,
      content: `text ${seq}`,
      createdAt: seq,
      tokens: 10,
      turnId: turnId ?? state.nextTurnId++,
    };
    state.appendEntry(entry);
    return entry;
  }
}

async function land(channel: BusyChannel, plan: CompactionPlan): Promise<void> {
  const match = matchSnapshot(channel.state, plan);
  assert.equal(match.place, 'marker');
  if (match.place !== 'marker') return;
  await applySplice({ state: channel.state, store: channel.store, plan, match, content: 'What was said.', summarizer: 'scripted', now: 0 });
}

test('held messages the cut dropped with their replies stay behind the marker; the summary takes only what it read', async () => {
  const channel = new BusyChannel(13);
  const { state } = channel;
  const plan = channel.plan(0.3);
  assert.ok(plan.held && plan.held.length > 0, 'the plan held messages back');
  channel.talk(10);
  const all = [...state.entries];
  await channel.truncate(Math.ceil(state.entries.length / 2));
  assert.ok(plan.held.every((entry) => !state.entries.includes(entry)), 'the cut dropped them, their replies before it');
  const live = [...state.entries];

  await land(channel, plan);
  const [summary, marker] = state.summaries;
  assert.equal(state.summaries.length, 2);
  assert.deepEqual([summary!.kind, summary!.fromSeq, summary!.toSeq], ['summary', plan.fromSeq, plan.toSeq]);
  assert.equal(marker!.kind, 'marker');
  assert.ok(marker!.fromSeq > summary!.toSeq, 'the marker starts after the summary');
  const rest = state.markerEntries.get(marker!.id)!;
  for (const held of plan.held) assert.ok(rest.includes(held), `held seq ${held.seq} stays behind the marker`);
  assert.ok(plan.entries.every((entry) => !rest.includes(entry)));
  assert.deepEqual(state.entries, live, 'the live context is untouched');
  channel.assertEachOnce(all, plan.entries);
  const change = channel.store.splices[0]!;
  assert.equal(change.entryRange, undefined, 'the live start stays where the cut put it');
  assert.deepEqual(change.shrunkMarker, { id: marker!.id, fromSeq: marker!.fromSeq, content: marker!.content, tokens: marker!.tokens });
});

test('held messages the cut held too stay live, in order, and the summary replaces the whole marker', async () => {
  const channel = new BusyChannel(13);
  const { state } = channel;
  const plan = channel.plan(0.3);
  assert.ok(plan.held && plan.held.length > 0);
  const range = plan.range!;
  channel.talk(1);
  const all = [...state.entries];
  await channel.truncate(range.length);
  assert.ok(plan.held.every((entry) => state.entries.includes(entry)), 'the cut held them as well');

  await land(channel, plan);
  assert.equal(state.summaries.length, 1, 'the marker stood for exactly what the worker read: it is gone');
  assert.deepEqual([state.summaries[0]!.kind, state.summaries[0]!.fromSeq, state.summaries[0]!.toSeq], ['summary', plan.fromSeq, plan.toSeq]);
  assert.deepEqual(state.entries.slice(0, plan.held.length), plan.held, 'held messages first, in order');
  assert.deepEqual(state.entries.map((entry) => entry.seq), [...state.entries.map((entry) => entry.seq)].sort((left, right) => left - right));
  channel.assertEachOnce(all, plan.entries);
});

test('a cut that took only part of what the worker read, or split it over two markers, means a re-plan', async () => {
  const partly = new BusyChannel(13);
  const plan = partly.plan(0.3);
  partly.talk(4);
  await partly.truncate(plan.range!.length - 4);
  assert.deepEqual(matchSnapshot(partly.state, plan), { place: 'gone', reason: 'range_changed' });

  await partly.truncate(Math.ceil(partly.state.entries.length / 2));
  assert.equal(partly.state.summaries.filter((summary) => summary.kind === 'marker').length, 2, 'markers stack while a worker is out');
  assert.deepEqual(matchSnapshot(partly.state, plan), { place: 'gone', reason: 'range_changed' });
});

test('when all the marker would keep lies inside the summary range (replies deleted meanwhile), the marker stays and it re-plans', async () => {
  const channel = new BusyChannel(13);
  const { state } = channel;
  const plan = channel.plan(0.3);
  channel.talk(10);
  await channel.truncate(Math.ceil(state.entries.length / 2));
  const marker = state.summaries[0]!;
  for (const entry of [...state.markerEntries.get(marker.id)!]) if (entry.seq > plan.toSeq) state.forgetMarkerEntry(entry.seq);
  assert.deepEqual(matchSnapshot(state, plan), { place: 'gone', reason: 'range_changed' });
});
