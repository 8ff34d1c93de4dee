import { errorMessage } from '../common/errors.js';
import type { ChannelState } from '../context/channel-state.js';
import { cappedEntryTokens } from './oversized-message.js';
import type { RuntimeParts, TurnEntryInput } from './runtime-types.js';
import type { HistoryEntry, IncomingMessage } from '../context/types.js';
import { isPlatformIdAfter } from '../context/history-store.js';
import { withoutNul } from '../common/outside-text.js';
import { normalizeIncoming } from './incoming-message.js';

type NewEntry = TurnEntryInput & { createdAt: number; turnId: number };

/**
 * How entries enter a channel: a platform message joins the live context at once and its row
 * follows in the next group commit (taken out again if that fails); a turn's tool traffic and
 * reply are written together, all or nothing.
 */
export class IngestPath {
  /** Per channel, the admission in progress (or the last one): messages take their seqs in arrival order. */
  private readonly admitting = new Map<string, Promise<void>>();

  constructor(private readonly parts: RuntimeParts) {}

  /** See `ChannelRuntime.ingest`. */
  ingest(incoming: IncomingMessage): Promise<HistoryEntry> {
    // Every adapter comes through here: ids checked and U+0000 replaced before anything is read
    // or written with them, the same on SQLite and PostgreSQL.
    let message: IncomingMessage;
    try {
      message = normalizeIncoming(incoming);
    } catch (error) {
      return Promise.reject(error);
    }
    const due = this.parts.scheduler.beforeMessage(message.channelId);
    // Settled straight from the write's own promise: the caller goes on as soon as it is
    // committed (a busy channel's next message is checked before slower work lands).
    return new Promise<HistoryEntry>((resolve, reject) => {
      const admit = (): void => {
        void this.inOrder(message.channelId, () => this.admit(message)).then((admitted) => admitted.done.then(resolve, reject), reject);
      };
      if (due) void due.then(admit, reject);
      else admit();
    });
  }

  /** Resolves once the messages of the channel that came in so far are admitted (never rejects). */
  admitted(channelId: string): Promise<void> {
    return this.admitting.get(channelId) ?? Promise.resolve();
  }

  /** Runs `work` once the admissions of the channel that started before it are done. */
  private inOrder<T>(channelId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.admitting.get(channelId);
    const result = previous ? previous.then(work) : work();
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.admitting.set(channelId, tail);
    void tail.then(() => {
      if (this.admitting.get(channelId) === tail) this.admitting.delete(channelId);
    });
    return result;
  }

  /**
   * Takes a message into the live context and queues its write; `done` settles once it is
   * committed (or taken out again). Wrapped, so that admitting does not wait for the commit.
   */
  private async admit(message: IncomingMessage): Promise<{ done: Promise<HistoryEntry> }> {
    const { parts } = this;
    const state = parts.loaded(message.channelId) ?? (await parts.channel(message.channelId));
    const unsettled = state.unsettled.get(message.messageId);
    if (unsettled) return { done: unsettled };
    // A platform id past every stored one is new: no round trip to ask the database.
    const fresh = isPlatformIdAfter(message.messageId, state.newestPlatformId);
    const stored = fresh ? undefined : await parts.store.findByMessageId(message.channelId, message.messageId);
    if (stored) return { done: Promise.resolve(stored) };
    const liveFrom = state.entries[0]?.seq ?? state.nextSeq;
    const replyTokens = message.replyToMessageId ? await parts.extras.replies.estimate(state.channelId, message.replyToMessageId, liveFrom) : 0;
    // The same message may have come in twice while the reads above were answered: the first
    // one that gets here takes it. From here until the write is queued nothing awaits.
    const raced = state.unsettled.get(message.messageId);
    if (raced) return { done: raced };
    // Kept as an upper bound even if the write fails: a redelivery then asks the database.
    if (isPlatformIdAfter(message.messageId, state.newestPlatformId)) state.newestPlatformId = message.messageId;
    if (message.parentChannelId !== undefined) parts.parents.set(message.channelId, message.parentChannelId);
    if (message.guildId !== undefined || message.dmUserId !== undefined) {
      state.location = { ...(message.guildId ? { guildId: message.guildId } : {}), ...(message.dmUserId ? { dmUserId: message.dmUserId } : {}) };
    }
    const last = state.entries[state.entries.length - 1];
    // A reply seen in a transcript belongs to the turn of the message it answers.
    const joinsTurn = message.role === 'assistant' && last !== undefined && last.role === 'user' && last.kind === 'message';
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
    parts.options.observer?.messageIngested?.();
    if (!parts.writer.staged) {
      if (message.replyToMessageId) await parts.extras.replies.record(state.channelId, entry, message.replyToMessageId, replyTokens);
      // Taken in now; its row follows (a change to the message waits for it).
      return this.ingestUnstaged(state, entry);
    }
    const queued = parts.writer.write(entry, state.location);
    // The reply link is its own small write; it fails the ingest, never the stored message.
    const recorded = message.replyToMessageId ? parts.extras.replies.record(state.channelId, entry, message.replyToMessageId, replyTokens) : undefined;
    const written = queued.then(
      () => {
        state.unsettled.delete(entry.messageId);
        return recorded ? recorded.then(() => entry) : entry;
      },
      (error: unknown) => {
        // Reported with the write's own error, which is what failed first.
        void recorded?.catch(() => {});
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
    // A truncation this message caused is reported by the time its ingest resolves.
    const truncation = state.truncationWritten;
    return { done: truncation ? written.then((stored) => truncation.then(() => stored)) : written };
  }

  /**
   * With a memory store in another database: the history row is written at once, on its own,
   * and the transcript follows through the archiver (writes in flight are tracked, so an edit or
   * a delete waits for them).
   */
  private ingestUnstaged(state: ChannelState, entry: HistoryEntry): { done: Promise<HistoryEntry> } {
    const { parts } = this;
    const written = parts.writer.writeNow(entry, state.location).then(
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
    // Until its row is written a change to the message waits for it (`MessageChanges`), and a
    // worker started meanwhile waits for its transcript, which follows the row.
    state.unsettled.set(entry.messageId, written);
    const archived = written.then((stored) => parts.archiver.archive(state, [stored]));
    const inFlight: Promise<void> = archived.then(
      () => undefined,
      () => undefined,
    );
    state.pendingArchives.add(inFlight);
    void inFlight.then(() => state.pendingArchives.delete(inFlight));
    parts.scheduler.afterMessage(state.channelId);
    this.checkProtecting(state, entry.seq);
    const truncation = state.truncationWritten;
    return { done: archived.then(() => (truncation ? truncation.then(() => entry) : entry)) };
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
  async appendToTurn(
    channelId: string,
    entries: TurnEntryInput[],
    turnId: number,
    options: { alongside?: () => Promise<unknown> } = {},
  ): Promise<HistoryEntry[]> {
    const { parts } = this;
    const state = await parts.channel(channelId);
    const appended = await state.exclusive(async () => {
      const appended: HistoryEntry[] = [];
      const fresh: HistoryEntry[] = [];
      // All or nothing: a tool call stored without its result (a crash or a failed write midway)
      // would stay in every later request of the channel.
      // Messages already accepted come first in the database as they do in the context.
      await parts.writer.flush();
      const saved = { nextSeq: state.nextSeq, nextTurnId: state.nextTurnId };
      // Taken into the context as they are written (a message coming in meanwhile gets the next
      // seq), and taken out again, each by its seq, when the transaction fails.
      const taken: HistoryEntry[] = [];
      try {
        await parts.options.db.transaction(async () => {
          for (const input of entries) {
            const entry = this.newEntry(state, { ...input, createdAt: parts.clock.now(), turnId });
            this.take(state, entry);
            taken.push(entry);
            if (!(await parts.writer.insertNow(entry, state.location))) {
              taken.pop();
              this.untake(state, entry);
              appended.push((await parts.store.findByMessageId(state.channelId, entry.messageId))!);
              continue;
            }
            appended.push(entry);
            if (entry.kind === 'message') fresh.push(entry);
          }
          await options.alongside?.();
        });
      } catch (error) {
        for (const entry of taken.reverse()) this.untake(state, entry);
        state.nextSeq = Math.max(saved.nextSeq, state.nextSeq);
        if (taken.length > 0 && state.nextTurnId === turnId + 1 && saved.nextTurnId <= turnId) state.nextTurnId = saved.nextTurnId;
        throw error;
      }
      if (fresh.length > 0 && !parts.writer.staged) void parts.archiver.archive(state, fresh);
      return appended;
    });
    parts.coordinator.check(state);
    return appended;
  }

  /** An entry taken for a write that did not happen: out of the context, its seq free again if still the newest. */
  private untake(state: ChannelState, entry: HistoryEntry): void {
    this.unreserve(state, entry);
    if (state.nextSeq === entry.seq + 1) state.nextSeq = entry.seq;
  }

  private newEntry(state: ChannelState, input: NewEntry): HistoryEntry {
    const seq = state.nextSeq;
    const cap = this.parts.messageCap(state);
    return {
      seq,
      channelId: state.channelId,
      messageId: input.messageId ?? `${state.channelId}:${seq}`,
      kind: input.kind,
      role: input.role,
      authorId: input.authorId,
      // The model's replies and tool traffic come in here too (platform messages are already
      // clean): PostgreSQL cannot store U+0000, so no backend keeps it.
      authorName: withoutNul(input.authorName),
      content: withoutNul(input.content),
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
