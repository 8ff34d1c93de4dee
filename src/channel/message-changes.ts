import type { ResolvedAttachment } from '../attachments/resolve-attachments.js';
import { errorMessage } from '../common/errors.js';
import { withoutNul } from '../common/outside-text.js';
import { clearErasedTraces } from '../storage/erase-traces.js';
import type { MemoryLocation } from '../memory/types.js';
import { findUserMessages } from '../privacy/erase-user.js';
import type { PrivacyPropagator, PropagationChanges, RemovedMessage } from './privacy-propagator.js';
import type { ChannelState } from '../context/channel-state.js';
import { cappedEntryTokens, fitFiles } from './oversized-message.js';
import type { RuntimeParts, UserErasure } from './runtime-types.js';
import { userErasedEvent } from './user-erasure.js';
import { SerialQueue } from './serial-queue.js';
import { TurnWatches, type LateChange, type RedactedReply, type TurnWatch } from './turn-watches.js';
import type { HistoryEntry } from '../context/types.js';

export type { RedactedReply, TurnWatch } from './turn-watches.js';

/**
 * Messages that change after they came in — edited or deleted on the platform, forgotten on
 * request, given their files — in history, the live context and the archive, with their old
 * words taken out of every copy by the privacy propagation.
 */
export class MessageChanges {
  private readonly replyListeners = new Set<(reply: RedactedReply) => void>();
  /** The turns running per channel, which follow the changes that reach them (see `watchTurn`). */
  private readonly turns: TurnWatches;
  /**
   * Per channel, the propagations of its changes and the late redactions of its turns, one at
   * a time: each reads the rows the one before it wrote, so none writes back a text another
   * has just redacted.
   */
  private readonly propagations = new SerialQueue();

  /** Called for every own reply redacted (the platform adapter edits its copy); returns a detach function. */
  onReplyRedacted(listener: (reply: RedactedReply) => void): () => void {
    this.replyListeners.add(listener);
    return () => this.replyListeners.delete(listener);
  }

  constructor(
    private readonly parts: RuntimeParts,
    private readonly privacy: PrivacyPropagator,
  ) {
    this.turns = new TurnWatches({
      redactLate: (channelId, changes) => this.redactLate(channelId, changes),
      replyRedacted: (reply) => this.tellReplyRedacted(reply),
      clearTraces: (channelId) => clearErasedTraces(parts.options.db, parts.options.events, channelId),
    });
  }

  /** See `ChannelRuntime.watchTurn`. */
  watchTurn(channelId: string): TurnWatch {
    return this.turns.watch(channelId);
  }

  /** Resolves once the messages of the channel that came in so far are admitted and their rows written (or given up). */
  private async arrived(channelId: string): Promise<void> {
    await this.parts.admitted(channelId);
    const state = this.parts.loaded(channelId);
    if (state && state.unsettled.size > 0) await Promise.allSettled([...state.unsettled.values()]);
  }

  /** See `ChannelRuntime.attachFiles`. */
  async attachFiles(channelId: string, messageId: string, files: readonly ResolvedAttachment[]): Promise<boolean> {
    // A message still coming in, or waiting for its group commit, is written first, so it can be found.
    await this.arrived(channelId);
    await this.parts.writer.flush();
    const row = await this.parts.store.findByMessageId(channelId, messageId);
    if (!row || files.length === 0) return row !== undefined;
    // The files are fitted to the message's cap once, here, as its text is on append.
    const state = await this.parts.channel(channelId);
    const cap = this.parts.messageCap(state);
    const fitted = fitFiles(files, cappedEntryTokens(row, cap), cap);
    return this.editMessage(channelId, messageId, await this.parts.extras.attach(channelId, row, fitted));
  }

  /** See `ChannelRuntime.editMessage`. */
  async editMessage(channelId: string, messageId: string, newText: string): Promise<boolean> {
    // Edited text comes from the platform as the message did: U+0000 replaced, as on ingest.
    const content = withoutNul(newText);
    const { parts } = this;
    const state = await parts.channel(channelId);
    await this.arrived(channelId);
    let late: LateChange | undefined;
    const row = await state.exclusive(async () => {
      await parts.writer.flush();
      const row = await parts.store.findByMessageId(channelId, messageId);
      if (!row || row.content === content) return row;
      const cap = parts.messageCap(state);
      const tokens = cappedEntryTokens({ ...row, content }, cap) + (await parts.extras.tokensOf(channelId, row.seq));
      const edited: HistoryEntry = { ...row, content, tokens };
      await parts.store.updateContent(channelId, row.seq, content, edited.tokens);
      const index = state.indexOfSeq(row.seq);
      if (index >= 0) state.replaceEntry(index, edited);
      state.replaceMarkerEntry(edited);
      // A turn answering the old text now leaves it out of what it posts and records.
      if (row.kind === 'message') late = this.turns.changed(channelId, [removedOf(row)], 'edit', [edited]);
      return row;
    });
    if (!row) return false;
    if (row.content === content) return true;
    parts.coordinator.check(state);
    if (row.kind === 'message') {
      // A transcript write still in flight carries the old text: let it land, then correct it.
      await parts.archiver.settled(state);
      await parts.options.memory.updateTranscript(channelId, [{ messageId, content }]);
      // The earlier text leaves tool results, summaries and memories like a deleted message.
      await this.propagate(channelId, [removedOf(row)], 'edit', late);
      // The earlier text also leaves what the database keeps beside its rows, as after a delete.
      await clearErasedTraces(parts.options.db, parts.options.events, channelId);
    }
    parts.publish({ kind: 'message_edited', channelId, ids: [messageId] });
    return true;
  }

  /** Messages leave history, live context and archive; their words leave every copy. */
  async removeMessages(channelId: string, messageIds: string[]): Promise<{ messages: number; counts: PropagationChanges['counts'] }> {
    const { parts } = this;
    const state = await parts.channel(channelId);
    const seqs: number[] = [];
    const removed: RemovedMessage[] = [];
    await this.arrived(channelId);
    await state.exclusive(async () => {
      await parts.writer.flush();
      for (const messageId of messageIds) {
        const row = await parts.store.findByMessageId(channelId, messageId);
        if (row) seqs.push(row.seq);
        if (row?.kind === 'message') removed.push(removedOf(row));
        // Archived only (its history row already gone): memories drawn from it still lose it.
        if (!row) removed.push({ seq: -1, messageId, authorName: '', content: '' });
      }
      if (seqs.length === 0) return;
      await parts.store.deleteEntries(channelId, seqs);
      await parts.extras.delete(channelId, seqs);
      for (const seq of seqs) {
        const index = state.indexOfSeq(seq);
        if (index >= 0) state.removeEntryAt(index);
        state.failedArchives.delete(seq);
        state.forgetMarkerEntry(seq);
      }
      state.archivedCount -= seqs.length;
    });
    // A turn answering one of them now leaves it out of what it posts and records.
    const late = this.turns.changed(channelId, removed, 'delete');
    if (messageIds.length === 0) return { messages: 0, counts: { toolEntries: 0, summaries: 0, memoriesDeleted: 0, memoriesUpdated: 0, workerTasks: 0, replies: 0 } };
    // A transcript write still in flight would bring a deleted message back: let it land first.
    await parts.archiver.settled(state);
    await parts.options.memory.deleteTranscript(channelId, messageIds);
    const changes = await this.propagate(channelId, removed, 'delete', late);
    parts.publish({ kind: 'messages_deleted', channelId, ids: messageIds });
    parts.options.events.emit({
      type: 'deletion_propagated',
      channel_id: channelId,
      messages: seqs.length,
      own_replies_redacted: changes.counts.replies,
      tool_entries_redacted: changes.counts.toolEntries,
      worker_tasks_redacted: changes.counts.workerTasks,
      summaries_changed: changes.counts.summaries,
      memories_deleted: changes.counts.memoriesDeleted,
      memories_updated: changes.counts.memoriesUpdated,
    });
    // The old text also leaves what the database keeps beside its rows (the SQLite WAL).
    await clearErasedTraces(parts.options.db, parts.options.events, channelId);
    return { messages: seqs.length, counts: changes.counts };
  }

  /** See `ChannelRuntime.forgetUser`. */
  async forgetUser(userId: string, requestedFrom: string): Promise<UserErasure> {
    const byChannel = await findUserMessages(this.parts.options.db, userId);
    const erasure: UserErasure = { channels: byChannel.size, messages: 0, memoriesDeleted: 0, memoriesUpdated: 0, summariesChanged: 0, toolEntriesRedacted: 0 };
    for (const [channelId, messageIds] of byChannel) {
      const result = await this.removeMessages(channelId, messageIds);
      erasure.messages += messageIds.length;
      erasure.memoriesDeleted += result.counts.memoriesDeleted;
      erasure.memoriesUpdated += result.counts.memoriesUpdated;
      erasure.summariesChanged += result.counts.summaries;
      erasure.toolEntriesRedacted += result.counts.toolEntries;
    }
    // The audit line: counts only, neither the user nor anything they wrote.
    this.parts.options.events.emit(userErasedEvent(erasure, requestedFrom));
    return erasure;
  }

  /** See `ChannelRuntime.forgetItem`. */
  async forgetItem(id: string, within?: MemoryLocation): Promise<'message' | 'memory' | undefined> {
    const memory = this.parts.options.memory;
    const item = await memory.describeItem?.(id);
    if (item?.kind === 'transcript' && item.messageId !== undefined) {
      if (within && item.channelId !== within.channelId) return undefined;
      await this.removeMessages(item.channelId, [item.messageId]);
      return 'message';
    }
    if (!(await memory.forget(id, within))) return undefined;
    if (item) await this.apply({ entries: await this.privacy.redactTexts([item.content]), summaries: [] });
    await clearErasedTraces(this.parts.options.db, this.parts.options.events);
    return 'memory';
  }

  /**
   * The privacy propagation of a change, queued behind the channel's others, and mirrored in
   * the live contexts, the archive and the platform once committed.
   */
  private propagate(channelId: string, removed: RemovedMessage[], mode: 'delete' | 'edit', late: LateChange | undefined): Promise<PropagationChanges> {
    // A turn running meanwhile was told of the change before this was queued (`turns.changed`).
    return this.propagations.run(channelId, async () => {
      const changes = await this.privacy.propagate(channelId, removed, mode);
      // A turn's late redaction queued behind this takes out what this did (memories' words too).
      if (late && changes.target) late.target = changes.target;
      // And its requests' system prompt shows the summaries as this left them.
      if (late) late.summaries = changes.summaries;
      await this.apply(changes);
      await this.redactReplies(channelId, changes.replies);
      return changes;
    });
  }

  /** See `TurnWatch.settle`: queued behind the propagations of the changes that reached the turn. */
  private redactLate(channelId: string, changes: readonly LateChange[]): Promise<boolean> {
    return this.propagations.run(channelId, async () => {
      const redacted = await this.privacy.redactLate(channelId, changes);
      if (redacted.entries.length === 0 && redacted.replies.length === 0) return false;
      await this.apply({ entries: redacted.entries, summaries: [] });
      // The turn's archive writes may still be in flight: they land first, then are corrected.
      await this.parts.archiver.settled(await this.parts.channel(channelId));
      // What the turn posted is the turn's to edit (`TurnWatch.close`), not the listeners'.
      await this.redactReplies(channelId, redacted.replies, { tell: false });
      return true;
    });
  }

  /**
   * The bot's replies that quoted the text: their archive copy (full text and vector) follows
   * the history row, and the platform adapter is told so that it edits what it posted (unless
   * a running turn still updates that copy itself).
   */
  private async redactReplies(channelId: string, replies: PropagationChanges['replies'], options: { tell?: boolean } = {}): Promise<void> {
    if (replies.length === 0) return;
    await this.apply({ entries: replies.map((reply) => reply.entry), summaries: [] });
    const { memory, events } = this.parts.options;
    try {
      // One transaction, and one index-file write, for every reply of the change.
      await memory.updateTranscript(
        channelId,
        replies.map(({ entry }) => ({ messageId: entry.messageId, content: entry.content })),
      );
    } catch (error) {
      events.emit({ type: 'reply_redaction_failed', channel_id: channelId, step: 'archive', replies: replies.length, error: errorMessage(error) });
    }
    for (const { entry, before } of replies) {
      if (options.tell === false || this.turns.claims(channelId, entry.messageId)) continue;
      this.tellReplyRedacted({ channelId, messageId: entry.messageId, before, after: entry.content });
    }
  }

  private tellReplyRedacted(reply: RedactedReply): void {
    for (const listener of this.replyListeners) {
      try {
        listener(reply);
      } catch (error) {
        this.parts.options.events.emit({ type: 'reply_redaction_failed', channel_id: reply.channelId, step: 'platform', error: errorMessage(error) });
      }
    }
  }

  /** Mirrors what the privacy propagation changed in the database into the live contexts held here. */
  async apply(changes: Pick<PropagationChanges, 'entries' | 'summaries'>): Promise<void> {
    const touched = new Set<ChannelState>();
    for (const entry of changes.entries) {
      const state = await this.parts.channel(entry.channelId);
      const index = state.indexOfSeq(entry.seq);
      if (index >= 0) state.replaceEntry(index, entry);
      state.replaceMarkerEntry(entry);
      touched.add(state);
    }
    for (const summary of changes.summaries) {
      const state = await this.parts.channel(summary.channelId);
      const { live, ...entry } = summary;
      if (!live) state.removeSummary(entry.id);
      else if (state.summaries.some((existing) => existing.id === entry.id)) state.replaceSummary(entry);
      touched.add(state);
    }
    for (const state of touched) {
      this.parts.coordinator.check(state);
      this.parts.publish({ kind: 'context_changed', channelId: state.channelId });
    }
  }
}

function removedOf(row: HistoryEntry): RemovedMessage {
  return { seq: row.seq, messageId: row.messageId, authorName: row.authorName, content: row.content };
}
