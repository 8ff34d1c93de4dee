import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { MemoryStore } from '../memory/types.js';
import type { ChannelState } from '../context/channel-state.js';
import type { HistoryStore } from './history-store.js';
import type { HistoryEntry } from '../context/types.js';

/**
 * Sends every appended message to the memory transcript (so `memory_search` finds it before
 * any compaction can touch it) and keeps track of writes in flight and writes that failed.
 */
export class TranscriptArchiver {
  /** Archived flags waiting to be written in one transaction. */
  private archivedFlags: Array<{ channelId: string; seq: number }> = [];
  private flagFlush: NodeJS.Immediate | undefined;

  constructor(private readonly options: { store: HistoryStore; memory: MemoryStore; events: EventStream }) {}

  /** Sends entries to the memory transcript; never rejects (a failure is retried later). */
  archive(state: ChannelState, entries: HistoryEntry[]): Promise<void> {
    const promise: Promise<void> = this.options.memory
      .archiveTranscript(
        entries.map((entry) => ({
          messageId: entry.messageId,
          channelId: entry.channelId,
          ...state.location,
          authorId: entry.authorId,
          authorName: entry.authorName,
          content: entry.content,
          createdAt: entry.createdAt,
        })),
      )
      .then(() => {
        for (const entry of entries) state.failedArchives.delete(entry.seq);
        this.queueArchivedFlags(state.channelId, entries);
      })
      .catch((error: unknown) => {
        for (const entry of entries) state.failedArchives.add(entry.seq);
        this.options.events.emit({
          type: 'archive_failed',
          channel_id: state.channelId,
          messages: entries.length,
          reason: errorMessage(error),
        });
      })
      .finally(() => state.pendingArchives.delete(promise));
    state.pendingArchives.add(promise);
    return promise;
  }

  /**
   * Waits for the channel's transcript writes started so far (they never reject); later ones
   * cannot carry a message that is already in history, so a busy channel does not hold it up.
   */
  async settled(state: ChannelState): Promise<void> {
    if (state.pendingArchives.size > 0) await Promise.all([...state.pendingArchives]);
  }

  /**
   * Before a worker reads its snapshot (once the writes in flight have landed): entries whose
   * write failed are sent again, with their current text. False when one still fails: compacting
   * it would take it out of the context before `memory_search` can find it. Synchronously true
   * when nothing failed, the usual case.
   */
  retryFailed(state: ChannelState, entries: readonly HistoryEntry[]): true | Promise<boolean> {
    if (state.failedArchives.size === 0) return true;
    const missing = entries.filter((entry) => entry.kind === 'message' && state.failedArchives.has(entry.seq));
    if (missing.length === 0) return true;
    const current = missing.map((entry) => state.entries[state.indexOfSeq(entry.seq)] ?? entry);
    return this.archive(state, current).then(() => missing.every((entry) => !state.failedArchives.has(entry.seq)));
  }

  /**
   * Sends again, in every channel given, the writes that failed (live or already truncated
   * entries alike), so that an outage is repaired while the bot runs, not only at its next start.
   */
  async repair(states: Iterable<ChannelState>): Promise<void> {
    const writes: Promise<unknown>[] = [];
    for (const state of states) {
      if (state.failedArchives.size === 0) continue;
      const failed: HistoryEntry[] = [];
      for (const seq of state.failedArchives) {
        const entry = state.entries[state.indexOfSeq(seq)] ?? (await this.options.store.findBySeq(state.channelId, seq));
        if (entry) failed.push(entry);
        else state.failedArchives.delete(seq);
      }
      const retried = this.retryFailed(state, failed);
      if (retried !== true) writes.push(retried);
    }
    await Promise.all(writes);
  }

  /** Writes the archived flags still queued (on close). Never rejects. */
  async flushFlags(): Promise<void> {
    if (this.flagFlush) clearImmediate(this.flagFlush);
    this.flagFlush = undefined;
    const flags = this.archivedFlags;
    this.archivedFlags = [];
    if (flags.length === 0) return;
    try {
      await this.options.store.markArchived(flags);
    } catch {
      // Only a saving is lost: unflagged rows are sent to the (idempotent) archive again on load.
    }
  }

  /**
   * The archived flags only save work after a crash (a flag still 0 means "send it again", and
   * the transcript write is idempotent), so they are written in batches, off the message path.
   */
  private queueArchivedFlags(channelId: string, entries: readonly HistoryEntry[]): void {
    for (const entry of entries) this.archivedFlags.push({ channelId, seq: entry.seq });
    this.flagFlush ??= setImmediate(() => void this.flushFlags());
  }
}
