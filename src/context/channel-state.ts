import type { ModelUsage } from '../llm/chat-model.js';
import { UNCALIBRATED, type Calibration } from './calibration.js';
import type { ChannelLocation, LoadedChannel } from './history-store.js';
import type { HistoryEntry, SummaryEntry } from './types.js';

/** What a running compaction holds while its worker reads the snapshot. */
export interface RunningCompaction {
  compactionId: string;
  tier: 'background' | 'aggressive' | 'manual';
  abort: AbortController;
}

export interface LastCompaction {
  tier: 'background' | 'aggressive' | 'emergency' | 'manual';
  at: number;
  messages: number;
}

/**
 * One channel's live context in memory, with running token totals so that a usage check is a
 * handful of additions. Entries are immutable objects: an edit replaces the object, which lets a
 * compaction compare its snapshot with the live head by identity.
 */
export class ChannelState {
  readonly channelId: string;
  /** Live entries, ascending seq. */
  entries: HistoryEntry[];
  /** Live summaries and markers, ascending fromSeq. */
  summaries: SummaryEntry[];
  entryTokens = 0;
  /** The part of `entryTokens` that is tool calls and results (corrected by their own factor). */
  toolTokens = 0;
  summaryTokens = 0;
  nextSeq: number;
  nextTurnId: number;
  /** Rows in the archive (live or not). */
  archivedCount: number;
  location: ChannelLocation;
  /** At least the greatest platform message id stored or being stored (see `LoadedChannel`). */
  newestPlatformId: string | undefined;
  /** Entries a truncation marker stands for, by marker id (this process only). */
  readonly markerEntries = new Map<number, HistoryEntry[]>();
  /** Transcript writes not yet confirmed by the memory store. */
  readonly pendingArchives = new Set<Promise<void>>();
  /** Incoming messages in the live context whose group commit has not landed yet, by message id. */
  readonly unsettled = new Map<string, Promise<HistoryEntry>>();
  /** Seqs whose transcript write failed in this process (retried before they are compacted). */
  readonly failedArchives = new Set<number>();
  /**
   * Truncation markers live in memory whose database write failed (retried at each check). A
   * marker never written yet has a provisional negative id until its row exists.
   */
  readonly unsavedMarkers = new Set<number>();
  compaction: RunningCompaction | undefined;
  /**
   * Entries from this seq on are not compacted: while a turn that names no message runs, the
   * newest entry when it began; during the check after a message comes in, that message.
   */
  protectFromSeq: number | undefined;
  /**
   * The turns whose messages the bot is to answer (a turn queued or running for them, a trigger
   * waiting for its turn), with how many hold each; shared with the runtime, which holds them
   * even before the channel is loaded. See `protectedFrom`.
   */
  awaitedTurns: ReadonlyMap<number, number> = new Map();
  consecutiveFailures = 0;
  lastCompaction: LastCompaction | undefined;
  /** The system prompt last counted, and its estimate (recounted only when it changes). */
  promptText: string | undefined;
  promptTokens = 0;
  /** The same prompt counted closer (see `estimateFixedTokens`): the real-count side of the fixed part. */
  promptFixedTokens = 0;
  /** How far the 4-characters-per-token estimate is from the model's count here (1 until it answers). */
  calibration: Calibration = { ...UNCALIBRATED };
  /** The last model request's usage (for `/context`); not persisted: the compaction log keeps the history. */
  lastRequest: { at: number; usage: ModelUsage } | undefined;
  /** The write-then-mirror section running now (see `exclusive`), if any. */
  private writing: Promise<void> | undefined;
  /** Called when the last exclusive section ends (the runtime runs a check held back meanwhile). */
  onIdle: (() => void) | undefined;
  /**
   * A Compactor check was held back while an exclusive section ran: it runs when that ends, for
   * every tier, or for an emergency only when a compaction was running (a worker tier would not
   * have started then).
   */
  checkOwed: 'all' | 'emergency' | undefined;
  /** The newest truncation's marker write and its report (`emergency_truncation`), until done. */
  truncationWritten: Promise<void> | undefined;

  constructor(channelId: string, loaded: LoadedChannel) {
    this.channelId = channelId;
    this.entries = loaded.entries;
    this.summaries = loaded.summaries;
    this.nextSeq = loaded.nextSeq;
    this.nextTurnId = loaded.nextTurnId;
    this.archivedCount = loaded.archivedCount;
    this.location = loaded.location;
    this.newestPlatformId = loaded.newestPlatformId;
    for (const entry of this.entries) this.count(entry, 1);
    for (const summary of this.summaries) this.summaryTokens += summary.tokens;
  }

  /**
   * The first seq no compaction or truncation may take now: the earliest live message of an
   * awaited turn, or `protectFromSeq`, whichever comes first. O(live entries) while a turn is
   * awaited: read when a cut is planned or landed, never by the check itself.
   */
  protectedFrom(): number | undefined {
    let from = this.protectFromSeq;
    if (this.awaitedTurns.size === 0) return from;
    for (const entry of this.entries) {
      if (from !== undefined && entry.seq >= from) break;
      if (this.awaitedTurns.has(entry.turnId)) {
        from = entry.seq;
        break;
      }
    }
    return from;
  }

  /** True while an exclusive section (a write whose mirror follows its commit) is in flight. */
  get busy(): boolean {
    return this.writing !== undefined;
  }

  /**
   * Runs a write and the in-memory change that mirrors it with no other such section of this
   * channel in between: a splice, an edit, a delete or a turn's entries read the state, await
   * their commit and only then change the state, and nothing may change it under them meanwhile.
   * Sections run one after another in call order; a failure passes to the caller only.
   */
  async exclusive<T>(work: () => Promise<T>): Promise<T> {
    const previous = this.writing;
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    this.writing = mine;
    if (previous) await previous;
    try {
      return await work();
    } finally {
      release();
      // The last section out lets the checks it held back run now, before its caller goes on.
      if (this.writing === mine) {
        this.writing = undefined;
        this.onIdle?.();
      }
    }
  }

  /** Index of the live entry with this seq, or -1 (binary search: seqs ascend). */
  indexOfSeq(seq: number): number {
    let low = 0;
    let high = this.entries.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const value = this.entries[middle]!.seq;
      if (value === seq) return middle;
      if (value < seq) low = middle + 1;
      else high = middle - 1;
    }
    return -1;
  }

  appendEntry(entry: HistoryEntry): void {
    this.entries.push(entry);
    this.count(entry, 1);
  }

  /** Entries another process added, joined in seq order. */
  addEntries(added: readonly HistoryEntry[]): void {
    for (const entry of added) this.count(entry, 1);
    this.entries = [...this.entries, ...added].sort((left, right) => left.seq - right.seq);
  }

  replaceEntry(index: number, entry: HistoryEntry): void {
    this.count(this.entries[index]!, -1);
    this.count(entry, 1);
    this.entries[index] = entry;
  }

  removeEntryAt(index: number): void {
    this.count(this.entries[index]!, -1);
    this.entries.splice(index, 1);
  }

  /** Removes the first `count` live entries and returns them. */
  removeHead(count: number): HistoryEntry[] {
    const removed = this.entries.splice(0, count);
    for (const entry of removed) this.count(entry, -1);
    return removed;
  }

  /**
   * Removes the first `count` live entries except those in `kept` (messages whose replies lie
   * past a cut through overlapping turns), which stay at the head in order. Returns the removed.
   */
  removeHeadExcept(count: number, kept: ReadonlySet<HistoryEntry>): HistoryEntry[] {
    if (kept.size === 0) return this.removeHead(count);
    const head = this.entries.splice(0, count);
    const removed: HistoryEntry[] = [];
    const stay: HistoryEntry[] = [];
    for (const entry of head) (kept.has(entry) ? stay : removed).push(entry);
    this.entries.unshift(...stay);
    for (const entry of removed) this.count(entry, -1);
    return removed;
  }

  /** Adds (`sign` 1) or takes away (-1) an entry's tokens from the running totals. */
  private count(entry: HistoryEntry, sign: 1 | -1): void {
    this.entryTokens += sign * entry.tokens;
    if (entry.kind !== 'message') this.toolTokens += sign * entry.tokens;
  }

  /** No marker stands for this entry any more (deleted, or its write failed). */
  forgetMarkerEntry(seq: number): void {
    for (const dropped of this.markerEntries.values()) {
      const at = dropped.findIndex((entry) => entry.seq === seq);
      if (at >= 0) dropped.splice(at, 1);
    }
  }

  /** A marker that stands for this entry holds its new version (edited, redacted). */
  replaceMarkerEntry(entry: HistoryEntry): void {
    for (const dropped of this.markerEntries.values()) {
      const at = dropped.findIndex((candidate) => candidate.seq === entry.seq);
      if (at >= 0) dropped[at] = entry;
    }
  }

  addSummary(summary: SummaryEntry): void {
    let index = this.summaries.length;
    while (index > 0 && this.summaries[index - 1]!.fromSeq > summary.fromSeq) index -= 1;
    this.summaries.splice(index, 0, summary);
    this.summaryTokens += summary.tokens;
  }

  removeSummary(id: number): void {
    const index = this.summaries.findIndex((summary) => summary.id === id);
    if (index < 0) return;
    this.summaryTokens -= this.summaries[index]!.tokens;
    this.summaries.splice(index, 1);
    this.markerEntries.delete(id);
  }

  /**
   * The summary with id `from` is now known by `to.id` (its row was written late); its entries
   * follow it. It stays the same object: a compaction planned while its row was being written
   * still finds it in place.
   */
  renameSummary(from: number, to: SummaryEntry): void {
    const index = this.summaries.findIndex((existing) => existing.id === from);
    if (index < 0) return;
    const existing = this.summaries[index]!;
    this.summaryTokens += to.tokens - existing.tokens;
    Object.assign(existing, to);
    const entries = this.markerEntries.get(from);
    this.markerEntries.delete(from);
    if (entries) this.markerEntries.set(to.id, entries);
  }

  replaceSummary(summary: SummaryEntry): void {
    const index = this.summaries.findIndex((existing) => existing.id === summary.id);
    if (index < 0) return;
    this.summaryTokens += summary.tokens - this.summaries[index]!.tokens;
    this.summaries[index] = summary;
  }
}
