import { errorMessage } from '../common/errors.js';
import type { ChannelState } from './channel-state.js';
import { cappedEntryTokens, messageCap } from './oversized-message.js';
import type { RuntimeParts, TurnEntryInput } from './runtime-types.js';
import type { HistoryEntry, IncomingMessage } from './types.js';

type NewEntry = TurnEntryInput & { createdAt: number; turnId: number };

/**
 * How entries enter a channel: a platform message joins the live context at once and its row
 * follows in the next group commit (taken out again if that fails); a turn's tool traffic and
 * reply are written together, all or nothing.
 */
export class IngestPath {
  constructor(private readonly parts: RuntimeParts) {}

  /** See `ChannelRuntime.ingest`. */
  async ingest(message: IncomingMessage): Promise<HistoryEntry> {
    const { parts } = this;
    const due = parts.scheduler.beforeMessage(message.channelId);
    if (due) await due;
    const state = parts.channel(message.channelId);
    const unsettled = state.unsettled.get(message.messageId);
    if (unsettled) return unsettled;
    const stored = parts.store.findByMessageId(message.channelId, message.messageId);
    if (stored) return stored;
    if (message.parentChannelId !== undefined) parts.parents.set(message.channelId, message.parentChannelId);
    if (message.guildId !== undefined || message.dmUserId !== undefined) {
      state.location = { ...(message.guildId ? { guildId: message.guildId } : {}), ...(message.dmUserId ? { dmUserId: message.dmUserId } : {}) };
    }
    const last = state.entries[state.entries.length - 1];
    // A reply seen in a transcript belongs to the turn of the message it answers.
    const joinsTurn = message.role === 'assistant' && last !== undefined && last.role === 'user' && last.kind === 'message';
    const liveFrom = state.entries[0]?.seq ?? state.nextSeq;
    const replyTokens = message.replyToMessageId ? parts.extras.replies.estimate(state.channelId, message.replyToMessageId, liveFrom) : 0;
    const entry = this.reserve(state, {
      kind: 'message',
      role: message.role,
      authorId: message.authorId,
      authorName: message.authorName,
      content: message.content,
      messageId: message.messageId,
      createdAt: message.createdAt,
      turnId: joinsTurn ? last.turnId : state.nextTurnId,
      extraTokens: replyTokens,
    });
    if (message.replyToMessageId) parts.extras.replies.record(state.channelId, entry, message.replyToMessageId, replyTokens);
    parts.options.observer?.messageIngested?.();
    if (!parts.writer.staged) return this.ingestUnstaged(state, entry);
    const written = parts.writer.write(entry, state.location).then(
      () => {
        state.unsettled.delete(entry.messageId);
        return entry;
      },
      (error: unknown) => {
        state.unsettled.delete(entry.messageId);
        this.unreserve(state, entry);
        parts.options.events.emit({ type: 'ingest_failed', channel_id: state.channelId, reason: errorMessage(error) });
        throw error;
      },
    );
    state.unsettled.set(entry.messageId, written);
    parts.scheduler.afterMessage(message.channelId);
    // The message just in is what its turn answers: a truncation must not drop it before then.
    this.checkProtecting(state, entry.seq);
    await written;
    return entry;
  }

  /**
   * With a memory store in another database: the history row is written at once, on its own,
   * and the transcript follows through the archiver (writes in flight are tracked, so an edit or
   * a delete waits for them).
   */
  private async ingestUnstaged(state: ChannelState, entry: HistoryEntry): Promise<HistoryEntry> {
    const { parts } = this;
    try {
      parts.writer.writeNow(entry, state.location);
    } catch (error) {
      this.unreserve(state, entry);
      parts.options.events.emit({ type: 'ingest_failed', channel_id: state.channelId, reason: errorMessage(error) });
      throw error;
    }
    parts.scheduler.afterMessage(state.channelId);
    const archived = parts.archiver.archive(state, [entry]);
    this.checkProtecting(state, entry.seq);
    await archived;
    return entry;
  }

  /** The Compactor check after a message came in, with that message protected from truncation. */
  private checkProtecting(state: ChannelState, seq: number): void {
    const protect = state.protectFromSeq;
    state.protectFromSeq ??= seq;
    try {
      this.parts.coordinator.check(state);
    } finally {
      state.protectFromSeq = protect;
    }
  }

  /** See `ChannelRuntime.appendToTurn`. */
  appendToTurn(channelId: string, entries: TurnEntryInput[], turnId: number): HistoryEntry[] {
    const { parts } = this;
    const state = parts.channel(channelId);
    const appended: HistoryEntry[] = [];
    const fresh: HistoryEntry[] = [];
    // All or nothing: a tool call stored without its result (a crash or a failed write midway)
    // would stay in every later request of the channel.
    // Messages already accepted come first in SQLite as they do in the context.
    parts.writer.flush();
    const saved = { nextSeq: state.nextSeq, nextTurnId: state.nextTurnId, archivedCount: state.archivedCount, live: state.entries.length };
    try {
      parts.options.db.transaction(() => {
        for (const input of entries) {
          const result = this.append(state, { ...input, createdAt: parts.clock.now(), turnId });
          appended.push(result.entry);
          if (result.fresh && result.entry.kind === 'message') fresh.push(result.entry);
        }
      })();
    } catch (error) {
      while (state.entries.length > saved.live) state.removeEntryAt(state.entries.length - 1);
      state.nextSeq = saved.nextSeq;
      state.nextTurnId = saved.nextTurnId;
      state.archivedCount = saved.archivedCount;
      throw error;
    }
    if (fresh.length > 0 && !parts.writer.staged) void parts.archiver.archive(state, fresh);
    parts.coordinator.check(state);
    return appended;
  }

  private append(state: ChannelState, input: NewEntry): { entry: HistoryEntry; fresh: boolean } {
    const entry = this.newEntry(state, input);
    if (!this.parts.writer.insertNow(entry, state.location)) {
      return { entry: this.parts.store.findByMessageId(state.channelId, entry.messageId)!, fresh: false };
    }
    this.take(state, entry);
    return { entry, fresh: true };
  }

  private newEntry(state: ChannelState, input: NewEntry): HistoryEntry {
    const seq = state.nextSeq;
    const cap = messageCap(this.parts.settings(state.channelId), state.calibration.factor);
    return {
      seq,
      channelId: state.channelId,
      messageId: input.messageId ?? `${state.channelId}:${seq}`,
      kind: input.kind,
      role: input.role,
      authorId: input.authorId,
      authorName: input.authorName,
      content: input.content,
      createdAt: input.createdAt,
      tokens: cappedEntryTokens(input, cap) + (input.extraTokens ?? 0),
      turnId: input.turnId,
    };
  }

  /** An incoming message enters the live context now; its row follows in the next group commit. */
  private reserve(state: ChannelState, input: NewEntry): HistoryEntry {
    const entry = this.newEntry(state, input);
    this.take(state, entry);
    return entry;
  }

  /** A message whose write failed leaves the context again (and any marker that took it). */
  private unreserve(state: ChannelState, entry: HistoryEntry): void {
    const index = state.indexOfSeq(entry.seq);
    if (index >= 0) state.removeEntryAt(index);
    state.forgetMarkerEntry(entry.seq);
    state.archivedCount -= 1;
  }

  private take(state: ChannelState, entry: HistoryEntry): void {
    state.nextSeq = entry.seq + 1;
    if (entry.turnId >= state.nextTurnId) state.nextTurnId = entry.turnId + 1;
    state.archivedCount += 1;
    state.appendEntry(entry);
  }
}
