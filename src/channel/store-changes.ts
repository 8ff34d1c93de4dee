import type { ChangeFeed, StoreChange } from '../common/change-feed.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream, MagpieEvent } from '../common/events.js';
import type { PersonaStore } from '../persona/persona-store.js';
import type { ChannelState } from '../context/channel-state.js';
import type { LoadedChannel } from './history-store.js';

/** Events whose change reached the store and alters a channel's live context (a landing). */
const LANDINGS = new Set(['compaction_completed', 'emergency_truncation']);

export interface StoreChangesOptions {
  feed: ChangeFeed;
  events: EventStream;
  personas: PersonaStore;
  /** The channel's state if this process has it loaded (not touched: a change is not a use). */
  peek(channelId: string): ChannelState | undefined;
  loaded(): Iterable<ChannelState>;
  /** Reads the channel back from the store, after the writes queued here so far are committed. */
  read(channelId: string): Promise<LoadedChannel>;
  /** The channel's context changed: the Compactor checks it again. */
  changed(state: ChannelState): void;
}

/**
 * Keeps this process's loaded channels in step with what other processes serving the same
 * store change in them, and tells them what this process changes. A change heard for a loaded
 * channel makes it re-read from the store, inside the channel's exclusive section (after the
 * writes queued before it, and before any later one), and the channel's next model request
 * waits for that re-read. After the feed reconnects, every loaded channel and every persona is
 * read again: what was sent meanwhile was missed.
 */
export class StoreChanges {
  private readonly rereads = new Map<string, Promise<void>>();
  private readonly detach: (() => void)[];

  constructor(private readonly options: StoreChangesOptions) {
    this.detach = [
      options.feed.subscribe((change) => this.heard(change)),
      options.feed.onResubscribed(() => this.rereadAll()),
      // A compaction or truncation that landed here changed what others hold of the channel.
      options.events.subscribe((event) => {
        if (LANDINGS.has(event.type) && event.channel_id) this.publish({ kind: 'context_changed', channelId: event.channel_id });
      }),
    ];
  }

  /** Tells the other processes; a failure is logged (they catch up at their next reconnect or load). */
  publish(change: StoreChange): void {
    if (!this.options.feed.live) return;
    this.options.feed.publish(change).catch((error: unknown) => {
      this.options.events.emit({ type: 'change_publish_failed', ...(change.channelId ? { channel_id: change.channelId } : {}), kind: change.kind, error: errorMessage(error) });
    });
  }

  /** Settles once a re-read of the channel heard so far has been applied (at once when none is pending). */
  settled(channelId: string): Promise<void> | undefined {
    return this.rereads.get(channelId);
  }

  /** Every loaded channel and every persona, read again. */
  rereadAll(): Promise<void> {
    const reads: Promise<unknown>[] = [this.rereadPersona(undefined)];
    for (const state of this.options.loaded()) reads.push(this.reread(state.channelId, 'resubscribed'));
    return Promise.all(reads).then(() => undefined);
  }

  close(): void {
    for (const detach of this.detach) detach();
  }

  private heard(change: StoreChange): void {
    if (change.kind === 'erasure_requested' || change.channelId === undefined) return;
    if (change.kind === 'persona_changed') void this.rereadPersona(change.channelId);
    else void this.reread(change.channelId, change.kind);
  }

  private rereadPersona(channelId: string | undefined): Promise<void> {
    const read = channelId === undefined ? this.options.personas.reloadAll() : this.options.personas.reload(channelId);
    return read.then(
      () => {
        this.emit({ type: 'persona_reread', ...(channelId ? { channel_id: channelId } : {}) });
        if (channelId === undefined) return;
        const state = this.options.peek(channelId);
        if (state) this.options.changed(state);
      },
      (error: unknown) => this.emit({ type: 'persona_reread_failed', ...(channelId ? { channel_id: channelId } : {}), error: errorMessage(error) }),
    );
  }

  private reread(channelId: string, cause: string): Promise<void> {
    const state = this.options.peek(channelId);
    if (!state) return Promise.resolve();
    // The in-memory change follows the read inside the section, as every write's mirror does.
    const run = state
      .exclusive(async () => {
        // Entries appended from here on may commit while the read is under way: they stay.
        const horizon = state.nextSeq;
        return adoptStored(state, await this.options.read(channelId), horizon);
      })
      .then(
        (changed) => {
          this.emit({ type: 'channel_reread', channel_id: channelId, cause, changed });
          if (changed) this.options.changed(state);
        },
        (error: unknown) => this.emit({ type: 'channel_reread_failed', channel_id: channelId, cause, error: errorMessage(error) }),
      )
      .finally(() => {
        if (this.rereads.get(channelId) === run) this.rereads.delete(channelId);
      });
    this.rereads.set(channelId, run);
    return run;
  }

  private emit(event: MagpieEvent): void {
    this.options.events.emit(event);
  }
}

/**
 * Makes the live context match what the store holds now: entries gone from it leave, entries
 * whose text changed take the stored text, entries written by another process join, summaries
 * follow the stored set. What only this process has yet (messages whose group commit is in
 * flight, markers not yet written) stays.
 * Returns whether anything changed.
 */
function adoptStored(state: ChannelState, stored: LoadedChannel, horizon: number): boolean {
  let changed = false;
  const entries = new Map(stored.entries.map((entry) => [entry.seq, entry]));
  for (let index = state.entries.length - 1; index >= 0; index -= 1) {
    const entry = state.entries[index]!;
    const fresh = entries.get(entry.seq);
    if (fresh === undefined) {
      if (entry.seq >= horizon || state.unsettled.has(entry.messageId)) continue;
      state.removeEntryAt(index);
      state.failedArchives.delete(entry.seq);
      state.forgetMarkerEntry(entry.seq);
      changed = true;
    } else if (fresh.content !== entry.content) {
      // A new object only when the text changed: a running compaction compares its snapshot by identity.
      state.replaceEntry(index, fresh);
      state.replaceMarkerEntry(fresh);
      changed = true;
    }
  }
  // Entries another process added (its messages and turns) join in seq order, except those a
  // marker of this process stands for whose write has not landed yet (they left on purpose).
  const held = new Set(state.entries.map((entry) => entry.seq));
  const localOnly = state.summaries.filter((summary) => summary.id < 0 || state.unsavedMarkers.has(summary.id));
  const added = stored.entries.filter(
    (entry) => !held.has(entry.seq) && !localOnly.some((summary) => entry.seq >= summary.fromSeq && entry.seq <= summary.toSeq),
  );
  if (added.length > 0) {
    state.addEntries(added);
    changed = true;
  }
  const summaries = new Map(stored.summaries.map((summary) => [summary.id, summary]));
  for (const summary of [...state.summaries]) {
    if (summary.id < 0 || state.unsavedMarkers.has(summary.id)) continue;
    const fresh = summaries.get(summary.id);
    if (fresh === undefined) {
      state.removeSummary(summary.id);
      changed = true;
    } else if (fresh.content !== summary.content || fresh.tokens !== summary.tokens) {
      state.replaceSummary(fresh);
      changed = true;
    }
  }
  for (const summary of stored.summaries) {
    if (state.summaries.some((existing) => existing.id === summary.id)) continue;
    state.addSummary(summary);
    changed = true;
  }
  state.nextSeq = Math.max(state.nextSeq, stored.nextSeq);
  state.nextTurnId = Math.max(state.nextTurnId, stored.nextTurnId);
  state.archivedCount = stored.archivedCount;
  return changed;
}
