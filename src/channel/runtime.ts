import { isPostgres } from '../storage/sql-database.js';
import { PgChannelLocks } from '../storage/postgres/pg-channel-locks.js';
import { systemClock, type Clock } from '../common/clock.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { LiveConfig } from '../config/live-config.js';
import type { ChannelSettings } from '../config/types.js';
import type { ModelRequest, ToolDefinition } from '../llm/chat-model.js';
import type { MemoryStore } from '../memory/types.js';
import type { SqlDatabase } from '../storage/database.js';
import { CompactionCoordinator, type CompactionOutcome, type UsageObserver } from '../compaction/coordinator.js';
import type { CompactionAction } from '../compaction/compactor.js';
import { createExtractiveSummarizer } from '../compaction/extractive-summarizer.js';
import { ImmediateScheduler, type CompactionScheduler } from '../compaction/scheduler.js';
import type { Summarizer } from '../compaction/summarizer.js';
import type { ResolvedAttachment } from '../attachments/resolve-attachments.js';
import { withAttachmentNote } from '../attachments/summary-note.js';
import { PersonaStore } from '../persona/persona-store.js';
import { ChannelCache } from './channel-cache.js';
import { usableWindow, usageOf } from './calibration.js';
import { CalibrationKeeper } from './calibration-keeper.js';
import { ChannelState } from './channel-state.js';
import { DEFAULTS } from '../config/defaults.js';
import { EntryExtras } from './entry-extras.js';
import { HistoryStore } from './history-store.js';
import { IngestWriter } from './ingest-writer.js';
import { buildRequest, estimateToolTokens, SUMMARY_HEADER_TOKENS } from './model-request.js';
import { SerialQueue } from './serial-queue.js';
import { TranscriptArchiver } from './transcript-archiver.js';
import { PrivacyPropagator, type PropagationChanges, type RemovedMessage } from '../privacy/propagator.js';
import { findUserMessages } from '../privacy/erase-user.js';
import { resolveReplyReferences } from '../privacy/reply-reference.js';
import type { MemoryLocation } from '../memory/types.js';
import { cappedEntryTokens, messageCap } from './oversized-message.js';
import { estimateTokens } from './token-estimate.js';
import { channelSettingsIn, windowChanged } from './reload-check.js';
import type { ContextStatus, EntryKind, HistoryEntry, IncomingMessage, SummaryEntry } from './types.js';

export interface ChannelRuntimeOptions {
  db: SqlDatabase;
  memory: MemoryStore;
  config: LiveConfig;
  events: EventStream;
  /** Writes compaction summaries (the model, or the extractive summarizer offline). */
  summarizer: Summarizer;
  /** Stands in after repeated failures; default: the extractive summarizer. */
  fallbackSummarizer?: Summarizer;
  clock?: Clock;
  /** The tools the channel agent offers; counted in every usage estimate. */
  toolDefinitions?: ToolDefinition[];
  /** When finished workers land; default: as soon as they finish. */
  scheduler?: CompactionScheduler;
  /** Sees what no event reports because it happens too often to log (metrics). */
  observer?: RuntimeObserver;
  /** Sees usage at every check (the compaction log). */
  usageObserver?: UsageObserver;
  /** How often transcript writes that failed are sent again, in ms (0: only before compaction). Default 30 s. */
  archiveRepairIntervalMs?: number;
}

/** Hooks for high-frequency facts; each must be cheap: they run on every message. */
export interface RuntimeObserver {
  /** A platform message was appended (a duplicate id is not). */
  messageIngested?(): void;
  /** The usage one Compactor check saw (the same number it compares with the thresholds). */
  usageChecked?(usage: number): void;
}

/** What a model request of a channel is estimated at, and how the estimate is corrected there. */
export interface RequestEstimate {
  /** The 4-characters-per-token estimate of what `buildModelRequest` sends now. */
  estimatedTokens: number;
  /** The channel's correction factor (1 until a model has answered). */
  factor: number;
  /** `context_window − max_response_tokens`, in real tokens: no request may go above it. */
  usableWindow: number;
}

/** An entry the channel agent adds to its turn (tool calls, tool results, its reply). */
export interface TurnEntryInput {
  kind: EntryKind;
  role: 'user' | 'assistant';
  authorId: string;
  authorName: string;
  /** Text; for a tool call the JSON of its `tool_use` block, for a result of its `tool_result` block. */
  content: string;
  /** The platform id of a posted reply; generated when absent. */
  messageId?: string;
  /** Tokens of what travels with the entry besides its text (reply context); counted once. */
  extraTokens?: number;
}

/** What erasing a user removed, in counts. */
export interface UserErasure {
  channels: number;
  messages: number;
  memoriesDeleted: number;
  memoriesUpdated: number;
  summariesChanged: number;
  toolEntriesRedacted: number;
}

/** What the model would be sent now, in parts. */
export interface LiveContext {
  summaries: SummaryEntry[];
  entries: HistoryEntry[];
  estimatedTokens: number;
}

/**
 * Every channel's history and live context, one serial turn queue per channel, and the
 * Compactor watching them. The bot, the terminal chat and `magpie replay` all go through this
 * class. Channels load lazily from SQLite on first use and come back exactly as they were.
 */
export class ChannelRuntime {
  private readonly store: HistoryStore;
  private readonly states: ChannelCache;
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly queue = new SerialQueue();
  private readonly coordinator: CompactionCoordinator;
  private readonly scheduler: CompactionScheduler;
  private readonly clock: Clock;
  private countedTools: readonly ToolDefinition[];
  private readonly archiver: TranscriptArchiver;
  private readonly writer: IngestWriter;
  private toolTokens: number;
  /** Thread id → parent channel id, learnt from ingested messages; threads inherit settings. */
  private readonly parents = new Map<string, string>();
  private readonly extras: EntryExtras;
  /** Per-channel personas set with `/persona`; they replace the configured system prompt. */
  readonly personas: PersonaStore;
  /** Takes a removed message's words out of every copy (tool results, summaries, memories). */
  private readonly privacy: PrivacyPropagator;
  private readonly calibrations: CalibrationKeeper;
  private readonly unsubscribe: () => void;
  private readonly repairTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ChannelRuntimeOptions) {
    this.store = new HistoryStore(options.db);
    this.extras = new EntryExtras(options.db, this.store);
    this.personas = new PersonaStore(options.db);
    this.calibrations = new CalibrationKeeper({ db: options.db, events: options.events, clock: options.clock ?? systemClock });
    this.archiver = new TranscriptArchiver({ store: this.store, memory: options.memory, events: options.events });
    this.writer = new IngestWriter({ db: options.db, store: this.store, memory: options.memory });
    this.clock = options.clock ?? systemClock;
    this.states = new ChannelCache({
      load: (channelId) => this.load(channelId),
      isQuiet: (state) => this.isQuiet(state),
      unloaded: (state, reason) => {
        this.parents.delete(state.channelId);
        this.options.memory.releaseChannel?.(state.channelId);
        this.options.events.emit({ type: 'channel_unloaded', channel_id: state.channelId, reason, loaded: this.states.size });
      },
      limits: () => {
        const runtime = this.options.config.current().runtime ?? DEFAULTS.runtime;
        return { idleMs: runtime.channelIdleMs, maxLoaded: runtime.maxLoadedChannels };
      },
      now: () => this.clock.now(),
    });
    const idleMs = (options.config.current().runtime ?? DEFAULTS.runtime).channelIdleMs;
    // Idle channels are also dropped when no new channel arrives to push them out.
    this.sweepTimer = setInterval(() => this.unloadIdle(), Math.max(1_000, Math.min(60_000, Math.floor(idleMs / 2))));
    this.sweepTimer.unref();
    this.scheduler = options.scheduler ?? new ImmediateScheduler();
    this.countedTools = options.toolDefinitions ?? [];
    this.toolTokens = estimateToolTokens(this.countedTools);
    this.coordinator = new CompactionCoordinator({
      store: this.store,
      // On a shared store, one process at a time compacts a channel.
      ...(isPostgres(options.db) ? { locks: new PgChannelLocks(options.db) } : {}),
      events: options.events,
      clock: this.clock,
      summarizer: withAttachmentNote(options.summarizer),
      fallbackSummarizer: withAttachmentNote(options.fallbackSummarizer ?? createExtractiveSummarizer()),
      scheduler: this.scheduler,
      settingsFor: (channelId) => this.settings(channelId),
      estimate: (state, settings) => this.estimate(state, settings),
      retryFailedArchives: (state, entries) => {
        // The snapshot a worker reads must be in SQLite before its splice can be.
        this.writer.flush();
        return this.archiver.retryFailed(state, entries);
      },
      ...(options.observer?.usageChecked ? { usageChecked: (usage: number) => options.observer!.usageChecked!(usage) } : {}),
      ...(options.usageObserver ? { usageObserver: options.usageObserver } : {}),
    });
    this.privacy = new PrivacyPropagator({
      db: options.db,
      memory: options.memory,
      events: options.events,
      clock: this.clock,
      summarizer: options.summarizer,
      fallbackSettings: (channelId) => this.settings(channelId).compaction,
      locationOf: (channelId) => ({ channelId, ...(this.states.get(channelId)?.location ?? {}) }),
      onSummaryChanged: (summary) => this.applyPrivacyChanges({ entries: [], summaries: [summary] }),
    });
    // A smaller window, a lower threshold or a larger answer room applies at once, not at the
    // channel's next message: every loaded channel is checked now.
    this.unsubscribe = options.config.subscribe((next, previous) => {
      for (const state of this.states.values()) {
        const parentId = this.parents.get(state.channelId);
        if (windowChanged(channelSettingsIn(previous, state.channelId, parentId), channelSettingsIn(next, state.channelId, parentId))) {
          this.coordinator.check(state);
        }
      }
    });
    // Transcript writes that failed (an embedder outage) are sent again in the background.
    const interval = options.archiveRepairIntervalMs ?? 30_000;
    if (interval > 0) {
      this.repairTimer = setInterval(() => this.repairArchives(), interval);
      this.repairTimer.unref();
    }
  }

  /** Sends again every transcript write that failed, in every loaded channel (runs every 30 s by default). */
  repairArchives(): Promise<void> {
    return this.archiver.repair(this.states.values());
  }

  /**
   * Appends a platform message (idempotent per message id), then checks usage. Resolves once the
   * message is committed to SQLite together with its searchable transcript row: rows of many
   * channels share one group commit, so a resolved ingest survives `kill -9` at no cost per
   * message. The entry is in the live context at once; if its write fails it is taken out again
   * and the promise rejects.
   */
  async ingest(message: IncomingMessage): Promise<HistoryEntry> {
    const due = this.scheduler.beforeMessage(message.channelId);
    if (due) await due;
    const state = this.channel(message.channelId);
    const unsettled = state.unsettled.get(message.messageId);
    if (unsettled) return unsettled;
    const stored = this.store.findByMessageId(message.channelId, message.messageId);
    if (stored) return stored;
    if (message.parentChannelId !== undefined) this.parents.set(message.channelId, message.parentChannelId);
    if (message.guildId !== undefined || message.dmUserId !== undefined) {
      state.location = { ...(message.guildId ? { guildId: message.guildId } : {}), ...(message.dmUserId ? { dmUserId: message.dmUserId } : {}) };
    }
    const last = state.entries[state.entries.length - 1];
    // A reply seen in a transcript belongs to the turn of the message it answers.
    const joinsTurn = message.role === 'assistant' && last !== undefined && last.role === 'user' && last.kind === 'message';
    const liveFrom = state.entries[0]?.seq ?? state.nextSeq;
    const replyTokens = message.replyToMessageId ? this.extras.replies.estimate(state.channelId, message.replyToMessageId, liveFrom) : 0;
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
    if (message.replyToMessageId) this.extras.replies.record(state.channelId, entry, message.replyToMessageId, replyTokens);
    this.options.observer?.messageIngested?.();
    if (!this.writer.staged) return this.ingestUnstaged(state, entry);
    const written = this.writer.write(entry, state.location).then(
      () => {
        state.unsettled.delete(entry.messageId);
        return entry;
      },
      (error: unknown) => {
        state.unsettled.delete(entry.messageId);
        this.unreserve(state, entry);
        this.options.events.emit({ type: 'ingest_failed', channel_id: state.channelId, reason: errorMessage(error) });
        throw error;
      },
    );
    state.unsettled.set(entry.messageId, written);
    this.scheduler.afterMessage(message.channelId);
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
    try {
      this.writer.writeNow(entry, state.location);
    } catch (error) {
      this.unreserve(state, entry);
      this.options.events.emit({ type: 'ingest_failed', channel_id: state.channelId, reason: errorMessage(error) });
      throw error;
    }
    this.scheduler.afterMessage(state.channelId);
    const archived = this.archiver.archive(state, [entry]);
    this.checkProtecting(state, entry.seq);
    await archived;
    return entry;
  }

  /** The Compactor check after a message came in, with that message protected from truncation. */
  private checkProtecting(state: ChannelState, seq: number): void {
    const protect = state.protectFromSeq;
    state.protectFromSeq ??= seq;
    try {
      this.coordinator.check(state);
    } finally {
      state.protectFromSeq = protect;
    }
  }

  /** A turn id for work that starts without an incoming message. */
  newTurnId(channelId: string): number {
    const state = this.channel(channelId);
    return state.nextTurnId++;
  }

  /**
   * Adds the agent's tool calls, tool results and reply to a turn, in order. Put a tool call and
   * its result in the same call so that they stay adjacent. Synchronous; checks usage after.
   */
  appendToTurn(channelId: string, entries: TurnEntryInput[], turnId: number): HistoryEntry[] {
    const state = this.channel(channelId);
    const appended: HistoryEntry[] = [];
    const fresh: HistoryEntry[] = [];
    // All or nothing: a tool call stored without its result (a crash or a failed write midway)
    // would stay in every later request of the channel.
    // Messages already accepted come first in SQLite as they do in the context.
    this.writer.flush();
    const saved = { nextSeq: state.nextSeq, nextTurnId: state.nextTurnId, archivedCount: state.archivedCount, live: state.entries.length };
    try {
      this.options.db.transaction(() => {
        for (const input of entries) {
          const result = this.append(state, { ...input, createdAt: this.clock.now(), turnId });
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
    if (fresh.length > 0 && !this.writer.staged) void this.archiver.archive(state, fresh);
    this.coordinator.check(state);
    return appended;
  }

  /**
   * Runs work in the channel's serial turn queue; the Compactor checks when it is done. While it
   * runs, workers leave the newest message (the one the turn answers) and what follows alone.
   */
  runSerial<T>(channelId: string, work: () => Promise<T>): Promise<T> {
    return this.queue.run(channelId, async () => {
      const state = this.channel(channelId);
      state.protectFromSeq = state.entries.at(-1)?.seq;
      try {
        return await work();
      } finally {
        state.protectFromSeq = undefined;
        this.coordinator.check(state);
      }
    });
  }

  liveContext(channelId: string): LiveContext {
    const state = this.channel(channelId);
    return {
      summaries: [...state.summaries],
      entries: [...state.entries],
      estimatedTokens: this.estimate(state, this.settings(channelId)),
    };
  }

  /** Exactly what the model is sent for this channel now, and what the estimate counts. */
  buildModelRequest(channelId: string, options: { tools: ToolDefinition[]; maxTokens: number }): ModelRequest {
    const state = this.channel(channelId);
    if (options.tools !== this.countedTools) {
      this.countedTools = options.tools;
      this.toolTokens = estimateToolTokens(options.tools);
    }
    const settings = this.settings(channelId);
    const decorate = this.extras.decorator(channelId, state.entries[0]?.seq ?? state.nextSeq, { images: settings.vision });
    return buildRequest({
      systemPrompt: settings.systemPrompt,
      summaries: state.summaries,
      entries: resolveReplyReferences(state.entries, (messageId) => this.store.findByMessageId(channelId, messageId)),
      tools: options.tools,
      maxTokens: options.maxTokens,
      ...(decorate ? { decorate } : {}),
    });
  }

  /**
   * Gives the model a message's files: images and text are kept with the message (and counted
   * into its estimate), and its placeholders say what each file is, with its size. False when
   * the message is not in history (deleted meanwhile).
   */
  async attachFiles(channelId: string, messageId: string, files: readonly ResolvedAttachment[]): Promise<boolean> {
    // A message still waiting for its group commit is written first, so it can be found.
    this.writer.flush();
    const row = this.store.findByMessageId(channelId, messageId);
    if (!row || files.length === 0) return row !== undefined;
    return this.editMessage(channelId, messageId, this.extras.attach(channelId, row, files));
  }

  /** Who wrote a message, as history knows it (undefined when it is not, or no longer, there). */
  authorOf(channelId: string, messageId: string): string | undefined {
    return this.store.findByMessageId(channelId, messageId)?.authorId;
  }

  /** A message edited on the platform: its text changes in history, context and archive. */
  async editMessage(channelId: string, messageId: string, content: string): Promise<boolean> {
    const state = this.channel(channelId);
    this.writer.flush();
    const row = this.store.findByMessageId(channelId, messageId);
    if (!row) return false;
    if (row.content === content) return true;
    const tokens = cappedEntryTokens({ ...row, content }, this.messageCap(state)) + this.extras.tokensOf(channelId, row.seq);
    const edited: HistoryEntry = { ...row, content, tokens };
    this.store.updateContent(channelId, row.seq, content, edited.tokens);
    const index = state.indexOfSeq(row.seq);
    if (index >= 0) state.replaceEntry(index, edited);
    for (const dropped of state.markerEntries.values()) {
      const at = dropped.findIndex((entry) => entry.seq === row.seq);
      if (at >= 0) dropped[at] = edited;
    }
    this.coordinator.check(state);
    if (row.kind === 'message') {
      // A transcript write still in flight carries the old text: let it land, then correct it.
      await this.archiver.settled(state);
      await this.options.memory.updateTranscript(channelId, messageId, content);
      // The earlier text leaves tool results, summaries and memories like a deleted message.
      this.applyPrivacyChanges(this.privacy.propagate(channelId, [removedOf(row)], 'edit'));
    }
    return true;
  }

  /** Messages deleted on the platform leave history, live context and archive. Returns how many. */
  async deleteMessages(channelId: string, messageIds: string[]): Promise<number> {
    return (await this.removeMessages(channelId, messageIds)).messages;
  }

  private async removeMessages(channelId: string, messageIds: string[]): Promise<{ messages: number; counts: PropagationChanges['counts'] }> {
    const state = this.channel(channelId);
    this.writer.flush();
    const seqs: number[] = [];
    const removed: RemovedMessage[] = [];
    for (const messageId of messageIds) {
      const row = this.store.findByMessageId(channelId, messageId);
      if (row) seqs.push(row.seq);
      if (row?.kind === 'message') removed.push(removedOf(row));
      // Archived only (its history row already gone): memories drawn from it still lose it.
      if (!row) removed.push({ seq: -1, messageId, authorName: '', content: '' });
    }
    if (seqs.length > 0) {
      this.store.deleteEntries(channelId, seqs);
      this.extras.delete(channelId, seqs);
      for (const seq of seqs) {
        const index = state.indexOfSeq(seq);
        if (index >= 0) state.removeEntryAt(index);
        state.failedArchives.delete(seq);
        for (const dropped of state.markerEntries.values()) {
          const at = dropped.findIndex((entry) => entry.seq === seq);
          if (at >= 0) dropped.splice(at, 1);
        }
      }
      state.archivedCount -= seqs.length;
    }
    if (messageIds.length === 0) return { messages: 0, counts: { toolEntries: 0, summaries: 0, memoriesDeleted: 0, memoriesUpdated: 0 } };
    // A transcript write still in flight would bring a deleted message back: let it land first.
    await this.archiver.settled(state);
    await this.options.memory.deleteTranscript(channelId, messageIds);
    const changes = this.privacy.propagate(channelId, removed, 'delete');
    this.applyPrivacyChanges(changes);
    this.options.events.emit({
      type: 'deletion_propagated',
      channel_id: channelId,
      messages: seqs.length,
      tool_entries_redacted: changes.counts.toolEntries,
      summaries_changed: changes.counts.summaries,
      memories_deleted: changes.counts.memoriesDeleted,
      memories_updated: changes.counts.memoriesUpdated,
    });
    return { messages: seqs.length, counts: changes.counts };
  }

  /**
   * Erases everything a user wrote, in every channel of this data dir, with the same
   * propagation as a delete. Returns counts only (the audit line carries no content).
   */
  async forgetUser(userId: string, requestedFrom: string): Promise<UserErasure> {
    const byChannel = findUserMessages(this.options.db, userId);
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
    this.options.events.emit({
      type: 'user_erased',
      requested_from: requestedFrom,
      channels: erasure.channels,
      messages: erasure.messages,
      memories_deleted: erasure.memoriesDeleted,
      memories_updated: erasure.memoriesUpdated,
      summaries_changed: erasure.summariesChanged,
      tool_entries_redacted: erasure.toolEntriesRedacted,
    });
    return erasure;
  }

  /**
   * `/memory forget` and `magpie memory forget`: an archived message (`msg-…`) is deleted as
   * if deleted on the platform; a memory (`mem-…`) is deleted and its text leaves tool results.
   * With `within`, only what belongs to that channel (a DM: its user).
   */
  async forgetItem(id: string, within?: MemoryLocation): Promise<'message' | 'memory' | undefined> {
    const item = this.options.memory.describeItem?.(id);
    if (item?.kind === 'transcript' && item.messageId !== undefined) {
      if (within && item.channelId !== within.channelId) return undefined;
      await this.deleteMessages(item.channelId, [item.messageId]);
      return 'message';
    }
    if (!this.options.memory.forget(id, within)) return undefined;
    if (item) this.applyPrivacyChanges({ entries: this.privacy.redactTexts([item.content]), summaries: [] });
    return 'memory';
  }

  /** Resolves when summary rewrites started by deletes have landed (tests, the CLI). */
  async privacySettled(): Promise<void> {
    await this.privacy.settled();
  }

  /** Mirrors what the privacy propagation changed in SQLite into the live contexts held here. */
  private applyPrivacyChanges(changes: Pick<PropagationChanges, 'entries' | 'summaries'>): void {
    const touched = new Set<ChannelState>();
    for (const entry of changes.entries) {
      const state = this.states.get(entry.channelId);
      if (!state) continue;
      const index = state.indexOfSeq(entry.seq);
      if (index >= 0) state.replaceEntry(index, entry);
      for (const dropped of state.markerEntries.values()) {
        const at = dropped.findIndex((candidate) => candidate.seq === entry.seq);
        if (at >= 0) dropped[at] = entry;
      }
      touched.add(state);
    }
    for (const summary of changes.summaries) {
      const state = this.states.get(summary.channelId);
      if (!state) continue;
      const { live, ...entry } = summary;
      if (!live) state.removeSummary(entry.id);
      else if (state.summaries.some((existing) => existing.id === entry.id)) state.replaceSummary(entry);
      touched.add(state);
    }
    for (const state of touched) this.coordinator.check(state);
  }

  status(channelId: string): ContextStatus {
    const state = this.channel(channelId);
    const settings = this.settings(channelId);
    const estimatedTokens = this.estimate(state, settings);
    const factor = state.calibration.factor;
    const status: ContextStatus = {
      channelId,
      estimatedTokens,
      contextWindow: settings.contextWindow,
      usableWindow: usableWindow(settings),
      calibration: { factor, observations: state.calibration.observations },
      calibratedTokens: Math.round(estimatedTokens * factor),
      usage: usageOf(estimatedTokens, factor, settings),
      thresholds: {
        background: settings.compaction.backgroundThreshold,
        aggressive: settings.compaction.aggressiveThreshold,
        emergency: settings.compaction.emergencyThreshold,
      },
      liveMessages: state.entries.length,
      summaries: state.summaries.length,
      archivedMessages: state.archivedCount,
      compactionRunning: state.compaction !== undefined,
    };
    if (state.lastCompaction) status.lastCompaction = { ...state.lastCompaction };
    return status;
  }

  /** The Compactor check, as run after every message and turn. */
  check(channelId: string): CompactionAction {
    return this.coordinator.check(this.channel(channelId));
  }

  /** Compacts the oldest part now (the `/compact` command); settles when the result has landed. */
  compactNow(channelId: string): Promise<CompactionOutcome> {
    return this.coordinator.compactNow(this.channel(channelId));
  }

  /**
   * Unloads quiet channels unused for `[runtime] channel_idle_ms` (and any beyond
   * `max_loaded_channels`); runs on a timer too. Returns how many were unloaded.
   */
  unloadIdle(): number {
    return this.states.evict();
  }

  /** Channels loaded in memory now. */
  get loadedChannels(): number {
    return this.states.size;
  }

  /** Group commits so far: how many, how many writes they carried, the largest (benchmarks). */
  ingestStats(): { commits: number; writes: number; largestGroup: number } {
    return { ...this.writer.stats };
  }

  /** Lands every finished-but-held worker result (end of a replay). */
  async flushCompactions(): Promise<void> {
    await this.coordinator.drain();
  }

  /**
   * Stops: running workers are abandoned (a restart would not apply them either), pending
   * archive writes finish. The database and memory store belong to the caller.
   */
  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    this.writer.flush();
    for (const state of this.states.values()) await Promise.allSettled([...state.unsettled.values()]);
    this.unsubscribe();
    if (this.repairTimer) clearInterval(this.repairTimer);
    await this.coordinator.close(this.states.values());
    await this.privacy.close();
    for (const state of this.states.values()) await this.archiver.settled(state);
    this.archiver.flushFlags();
  }

  private settings(channelId: string): ChannelSettings {
    const parent = this.parents.get(channelId);
    const settings = this.options.config.settingsFor(channelId, parent);
    const persona = this.personas.get(channelId) ?? (parent === undefined ? undefined : this.personas.get(parent));
    return persona ? { ...settings, systemPrompt: persona.prompt } : settings;
  }

  /** The system prompt a channel's model gets now: its persona, else the configured one. */
  systemPromptOf(channelId: string): string {
    return this.settings(channelId).systemPrompt;
  }

  /** O(1): running totals plus the prompt, recounted only when hot reload changed it. */
  private estimate(state: ChannelState, settings: ChannelSettings): number {
    if (state.promptText !== settings.systemPrompt) {
      state.promptText = settings.systemPrompt;
      state.promptTokens = estimateTokens(settings.systemPrompt);
    }
    const header = state.summaries.length > 0 ? SUMMARY_HEADER_TOKENS : 0;
    return state.promptTokens + this.toolTokens + header + state.summaryTokens + state.entryTokens;
  }

  /** What a request of this channel is estimated at now, and the correction that applies. */
  requestEstimate(channelId: string): RequestEstimate {
    const state = this.channel(channelId);
    const settings = this.settings(channelId);
    return { estimatedTokens: this.estimate(state, settings), factor: state.calibration.factor, usableWindow: usableWindow(settings) };
  }

  /**
   * A model response counted `inputTokens` for a request estimated at `estimatedTokens`: the
   * channel's factor learns from it (smoothed, bounded) and is saved with the channel.
   */
  recordUsage(channelId: string, estimatedTokens: number, inputTokens: number): void {
    this.calibrations.record(this.channel(channelId), estimatedTokens, inputTokens);
  }

  /**
   * The model refused a request estimated at `estimatedTokens` as too long (`tokens` > `maximum`
   * when the server said): the factor takes the server's count, and the live context is truncated
   * as an emergency would, below the emergency threshold (and below what the server accepts).
   * True when something changed, so a retry can fit.
   */
  recoverFromOverflow(channelId: string, overflow: { estimatedTokens: number; tokens?: number; maximum?: number }): boolean {
    const state = this.channel(channelId);
    const settings = this.settings(channelId);
    const before = state.calibration.factor;
    const next = this.calibrations.overflow(state, overflow.estimatedTokens, overflow.tokens);
    // The server's maximum may be below the configured window: the answer's room comes off it too.
    const serverRoom = overflow.maximum === undefined ? Infinity : overflow.maximum - settings.maxResponseTokens;
    const room = Math.min(usableWindow(settings), Math.max(1, serverRoom));
    const ceiling = (settings.compaction.emergencyThreshold * room) / next.factor;
    const truncated = this.coordinator.truncateNow(state, { ceilingTokens: ceiling, reason: 'context_overflow' });
    return truncated || next.factor > before;
  }

  /** The most a single message may cost in this channel's requests (see `oversized-message.ts`). */
  private messageCap(state: ChannelState): number {
    return messageCap(this.settings(state.channelId), state.calibration.factor);
  }

  private channel(channelId: string): ChannelState {
    return this.states.get(channelId);
  }

  /** Nothing of the channel is in flight: unloading it now loses nothing a reload would not restore. */
  private isQuiet(state: ChannelState): boolean {
    return (
      state.compaction === undefined &&
      state.unsettled.size === 0 &&
      state.pendingArchives.size === 0 &&
      state.failedArchives.size === 0 &&
      state.protectFromSeq === undefined &&
      !this.queue.has(state.channelId)
    );
  }

  private load(channelId: string): ChannelState {
    const state = new ChannelState(channelId, this.store.load(channelId));
    state.calibration = this.calibrations.load(channelId);
    // Repairs a crash between the history write and the transcript index write.
    const missing = this.store.unarchived(channelId);
    if (missing.length > 0) void this.archiver.archive(state, missing);
    // Summaries that covered a deleted message and still wait for their rewrite.
    this.privacy.resume(channelId);
    return state;
  }

  private append(
    state: ChannelState,
    input: TurnEntryInput & { createdAt: number; turnId: number },
  ): { entry: HistoryEntry; fresh: boolean } {
    const entry = this.newEntry(state, input);
    if (!this.writer.insertNow(entry, state.location)) {
      return { entry: this.store.findByMessageId(state.channelId, entry.messageId)!, fresh: false };
    }
    this.take(state, entry);
    return { entry, fresh: true };
  }

  private newEntry(state: ChannelState, input: TurnEntryInput & { createdAt: number; turnId: number }): HistoryEntry {
    const seq = state.nextSeq;
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
      tokens: cappedEntryTokens(input, this.messageCap(state)) + (input.extraTokens ?? 0),
      turnId: input.turnId,
    };
  }

  /** An incoming message enters the live context now; its row follows in the next group commit. */
  private reserve(state: ChannelState, input: TurnEntryInput & { createdAt: number; turnId: number }): HistoryEntry {
    const entry = this.newEntry(state, input);
    this.take(state, entry);
    return entry;
  }

  /** A message whose write failed leaves the context again (and any marker that took it). */
  private unreserve(state: ChannelState, entry: HistoryEntry): void {
    const index = state.indexOfSeq(entry.seq);
    if (index >= 0) state.removeEntryAt(index);
    for (const dropped of state.markerEntries.values()) {
      const at = dropped.findIndex((candidate) => candidate.seq === entry.seq);
      if (at >= 0) dropped.splice(at, 1);
    }
    state.archivedCount -= 1;
  }

  private take(state: ChannelState, entry: HistoryEntry): void {
    state.nextSeq = entry.seq + 1;
    if (entry.turnId >= state.nextTurnId) state.nextTurnId = entry.turnId + 1;
    state.archivedCount += 1;
    state.appendEntry(entry);
  }
}

function removedOf(row: HistoryEntry): RemovedMessage {
  return { seq: row.seq, messageId: row.messageId, authorName: row.authorName, content: row.content };
}
