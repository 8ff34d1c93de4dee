/*
 * Over 400 lines on purpose: this is the one facade every adapter, command and worker calls,
 * and each method is a short delegation to a part in its own file (ingest-path, message-changes,
 * calibration-keeper, the coordinator); splitting the facade would only scatter its surface.
 */
import { errorMessage } from '../common/errors.js';
import { systemClock, type Clock } from '../common/clock.js';
import type { ChannelSettings } from '../config/types.js';
import type { ModelRequest, ModelUsage, ToolDefinition } from '../llm/chat-model.js';
import { usageFields } from '../llm/usage.js';
import { CompactionCoordinator, type CompactionOutcome, type UsageObserver } from '../compaction/coordinator.js';
import type { CompactionAction } from '../compaction/compactor.js';
import { createExtractiveSummarizer } from '../compaction/extractive-summarizer.js';
import { ImmediateScheduler } from '../compaction/scheduler.js';
import type { ResolvedAttachment } from '../attachments/resolve-attachments.js';
import { withAttachmentNote } from '../compaction/attachment-note.js';
import { PersonaStore } from '../persona/persona-store.js';
import { PrivacyPropagator } from './privacy-propagator.js';
import type { MemoryLocation } from '../memory/types.js';
import { DEFAULTS } from '../config/defaults.js';
import { ChannelCache } from './channel-cache.js';
import { cacheColdAt } from './cold-cache.js';
import { messageFactorOf, requestFactorsOf, UNCORRECTED, usableWindow, type RequestFactors } from '../context/calibration.js';
import { CalibrationKeeper } from './calibration-keeper.js';
import { channelRequest } from './channel-request.js';
import type { BlockSources, SystemSource } from './model-request.js';
import { ChannelState } from '../context/channel-state.js';
import { messageCap } from './oversized-message.js';
import { ContextEstimator } from './context-estimate.js';
import { EntryExtras } from './entry-extras.js';
import { HistoryStore } from './history-store.js';
import { IngestPath } from './ingest-path.js';
import { IngestWriter } from './ingest-writer.js';
import { MessageChanges, type RedactedReply, type TurnWatch } from './message-changes.js';
import { channelSettingsIn, windowChanged } from './reload-check.js';
import type { ChannelRuntimeOptions, EstimateObserver, LiveContext, RequestEstimate, RuntimeParts, TurnEntryInput, UserErasure } from './runtime-types.js';
import { SerialQueue } from './serial-queue.js';
import { StoreChanges } from './store-changes.js';
import { NO_CHANGE_FEED } from '../common/change-feed.js';
import { TranscriptArchiver } from './transcript-archiver.js';
import type { ContextStatus, HistoryEntry, IncomingMessage } from '../context/types.js';

export type { ChannelRuntimeOptions, EstimateObserver, LiveContext, RequestEstimate, RuntimeObserver, TurnEntryInput, UserErasure } from './runtime-types.js';

/**
 * Every channel's history and live context, one serial turn queue per channel, and the
 * Compactor watching them. The bot, the terminal chat and `magpie replay` all go through this
 * class. Channels load lazily from the database on first use and come back exactly as they were.
 *
 * The work is done by its parts: `IngestPath` (messages and turns coming in), `MessageChanges`
 * (edits, deletes, forgetting), `ContextEstimator` (what a request costs) and the
 * `CompactionCoordinator`; this class wires them and keeps the channels loaded.
 */
export class ChannelRuntime {
  private readonly store: HistoryStore;
  private readonly states: ChannelCache;
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly queue = new SerialQueue();
  private readonly coordinator: CompactionCoordinator;
  private readonly clock: Clock;
  private readonly archiver: TranscriptArchiver;
  private readonly writer: IngestWriter;
  private readonly estimator: ContextEstimator;
  /** Thread id → parent channel id, learnt from ingested messages; threads inherit settings. */
  private readonly parents = new Map<string, string>();
  private readonly extras: EntryExtras;
  /** Per-channel personas set with `/persona`; they replace the configured system prompt. */
  readonly personas: PersonaStore;
  /** Rewrites being looked up for resuming after a channel load (see `load`). */
  private readonly resuming = new Set<Promise<void>>();
  /** Takes a removed message's words out of every copy (tool results, summaries, memories). */
  private readonly privacy: PrivacyPropagator;
  private readonly calibrations: CalibrationKeeper;
  private readonly ingestPath: IngestPath;
  private readonly changes: MessageChanges;
  private readonly unsubscribe: () => void;
  private readonly repairTimer: NodeJS.Timeout | undefined;
  /** What other processes on the same store change in loaded channels, and what this one tells them. */
  private readonly storeChanges: StoreChanges;
  /** Per channel, the turns whose messages are awaiting an answer (see `awaitAnswer`). */
  private readonly awaited = new Map<string, Map<number, number>>();

  constructor(private readonly options: ChannelRuntimeOptions) {
    this.clock = options.clock ?? systemClock;
    this.store = new HistoryStore(options.db);
    this.extras = new EntryExtras(options.db, this.store);
    this.personas = new PersonaStore(options.db, (channelId) => this.storeChanges.publish({ kind: 'persona_changed', channelId }));
    this.calibrations = new CalibrationKeeper({ db: options.db, events: options.events, clock: this.clock });
    this.archiver = new TranscriptArchiver({ store: this.store, memory: options.memory, events: options.events });
    this.writer = new IngestWriter({ db: options.db, store: this.store, memory: options.memory });
    this.estimator = new ContextEstimator(options.toolDefinitions ?? []);
    this.states = new ChannelCache({
      load: (channelId) => this.load(channelId),
      isQuiet: (state) => this.isQuiet(state),
      unloaded: (state, reason) => {
        this.parents.delete(state.channelId);
        if (state.awaitedTurns.size === 0) this.awaited.delete(state.channelId);
        void this.options.memory.releaseChannel?.(state.channelId).catch((error: unknown) => {
          this.options.events.emit({ type: 'channel_release_failed', channel_id: state.channelId, error: errorMessage(error) });
        });
        this.options.events.emit({ type: 'channel_unloaded', channel_id: state.channelId, reason, loaded: this.states.size });
      },
      limits: () => {
        const runtime = this.options.config.current().runtime ?? DEFAULTS.runtime;
        return { idleMs: runtime.channelIdleMs, maxLoaded: runtime.maxLoadedChannels };
      },
      now: () => this.clock.now(),
    });
    this.storeChanges = new StoreChanges({
      feed: options.changes ?? NO_CHANGE_FEED,
      events: options.events,
      personas: this.personas,
      peek: (channelId) => this.states.peek(channelId),
      loaded: () => this.states.values(),
      read: async (channelId) => {
        await this.writer.flush();
        return this.store.load(channelId);
      },
      changed: (state) => this.coordinator.check(state),
    });
    const idleMs = (options.config.current().runtime ?? DEFAULTS.runtime).channelIdleMs;
    // Idle channels are also dropped when no new channel arrives to push them out.
    this.sweepTimer = setInterval(() => this.unloadIdle(), Math.max(1_000, Math.min(60_000, Math.floor(idleMs / 2))));
    this.sweepTimer.unref();
    const scheduler = options.scheduler ?? new ImmediateScheduler();
    this.coordinator = new CompactionCoordinator({
      store: this.store,
      ...(options.locks ? { locks: options.locks } : {}),
      events: options.events,
      clock: this.clock,
      summarizer: withAttachmentNote(options.summarizer),
      fallbackSummarizer: withAttachmentNote(options.fallbackSummarizer ?? createExtractiveSummarizer()),
      scheduler,
      settingsFor: (channelId) => this.settings(channelId),
      estimate: (state, settings) => this.estimator.estimate(state, settings),
      factorAt: (state, settings, tokens) => this.estimator.factorAt(state, settings, tokens),
      retryFailedArchives: (state, entries) => {
        // The snapshot a worker reads must be in the database before its splice can be
        // (synchronously true, as the worker expects, when nothing is queued or failed).
        if (this.writer.idle) return this.archiver.retryFailed(state, entries);
        return this.writer.flush().then(() => this.archiver.retryFailed(state, entries));
      },
      ...(options.observer?.usageChecked ? { usageChecked: (usage: number) => options.observer!.usageChecked!(usage) } : {}),
      ...(options.usageObserver ? { usageObserver: this.observeEstimates(options.usageObserver) } : {}),
    });
    this.privacy = new PrivacyPropagator({
      db: options.db,
      memory: options.memory,
      events: options.events,
      clock: this.clock,
      summarizer: options.summarizer,
      fallbackSettings: (channelId) => this.settings(channelId).compaction,
      locationOf: (channelId) => ({ channelId, ...(this.states.peek(channelId)?.location ?? {}) }),
      onSummaryChanged: (summary) => {
        void this.changes.apply({ entries: [], summaries: [summary] }).catch((error: unknown) => {
          options.events.emit({ type: 'summary_mirror_failed', channel_id: summary.channelId, error: errorMessage(error) });
        });
      },
    });
    const parts: RuntimeParts = {
      options,
      clock: this.clock,
      store: this.store,
      extras: this.extras,
      writer: this.writer,
      archiver: this.archiver,
      coordinator: this.coordinator,
      scheduler,
      parents: this.parents,
      channel: (channelId) => this.channel(channelId),
      admitted: (channelId) => this.ingestPath.admitted(channelId),
      loaded: (channelId) => this.states.touch(channelId),
      settings: (channelId) => this.settings(channelId),
      messageCap: (state) => {
        const settings = this.settings(state.channelId);
        // The fixed part as the usage counts it: in real tokens once the messages' factor is known.
        const fixed = this.estimator.calibrated(state, settings, this.estimator.fixedPart(state, settings).estimated);
        return messageCap(settings, messageFactorOf(state.calibration), fixed);
      },
      publish: (change) => this.storeChanges.publish(change),
    };
    this.ingestPath = new IngestPath(parts);
    this.changes = new MessageChanges(parts, this.privacy);
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
  ingest(message: IncomingMessage): Promise<HistoryEntry> {
    return this.ingestPath.ingest(message);
  }

  /** A turn id for work that starts without an incoming message. */
  async newTurnId(channelId: string): Promise<number> {
    const state = await this.channel(channelId);
    return state.nextTurnId++;
  }

  /**
   * Adds the agent's tool calls, tool results and reply to a turn, in order. Put a tool call and
   * its result in the same call so that they stay adjacent. Resolves once they are committed
   * (and in the live context); checks usage after.
   */
  appendToTurn(
    channelId: string,
    entries: TurnEntryInput[],
    turnId: number,
    /** `alongside`: more writes of the same transaction (a worker's task row closed with its report). */
    options: { alongside?: () => Promise<unknown> } = {},
  ): Promise<HistoryEntry[]> {
    return this.ingestPath.appendToTurn(channelId, entries, turnId, options);
  }

  /**
   * Runs work in the channel's serial turn queue; the Compactor checks when it is done. While it
   * runs, compaction leaves the newest entry at its start and what follows alone: what
   * `runAgentTurn` answers when it is given no turn. A turn that answers an earlier message (its
   * reply may land after later ones) holds that message with `awaitAnswer`, as the responder does.
   */
  runSerial<T>(channelId: string, work: () => Promise<T>): Promise<T> {
    return this.queue.run(channelId, async () => {
      const state = await this.channel(channelId);
      state.protectFromSeq = state.entries.at(-1)?.seq;
      try {
        return await work();
      } finally {
        state.protectFromSeq = undefined;
        this.coordinator.check(state);
      }
    });
  }

  /**
   * The message of turn `turnId` is to be answered: from now until the returned function is
   * called (once the turn that answers it has run, or will not), no worker summarizes it and no
   * truncation drops it, nor anything that came after it. Synchronous: the hold applies to the
   * very next check, loaded channel or not.
   */
  awaitAnswer(channelId: string, turnId: number): () => void {
    let turns = this.awaited.get(channelId);
    if (!turns) {
      turns = new Map();
      this.awaited.set(channelId, turns);
    }
    const held = turns;
    held.set(turnId, (held.get(turnId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = held.get(turnId)! - 1;
      if (left > 0) held.set(turnId, left);
      else held.delete(turnId);
      // A channel not loaded keeps no empty entry (a loaded one keeps the map its state shares).
      if (held.size === 0 && !this.states.peek(channelId) && this.awaited.get(channelId) === held) this.awaited.delete(channelId);
    };
  }

  async liveContext(channelId: string): Promise<LiveContext> {
    await this.storeChanges.settled(channelId);
    const state = await this.channel(channelId);
    return {
      summaries: [...state.summaries],
      entries: [...state.entries],
      estimatedTokens: this.estimator.estimate(state, this.settings(channelId)),
    };
  }

  /**
   * Exactly what the model is sent for this channel now, and what the estimate counts. With
   * `sources`, which entry each block of its messages stands for.
   */
  buildModelRequest(channelId: string, options: { tools: ToolDefinition[]; maxTokens: number; sources?: BlockSources; systemSource?: SystemSource }): Promise<ModelRequest> {
    // A loaded channel is read as it is at the call (what it held when asked, not after later
    // changes); only the archive lookups for reply quotes and files are awaited.
    // A change another process made here is read back first.
    const reread = this.storeChanges.settled(channelId);
    if (reread) return reread.then(() => this.buildModelRequest(channelId, options));
    const loaded = this.states.touch(channelId);
    const build = (state: ChannelState): Promise<ModelRequest> => {
      this.estimator.countTools(options.tools);
      return channelRequest({ state, settings: this.settings(channelId), store: this.store, extras: this.extras, ...options });
    };
    return loaded ? build(loaded) : this.channel(channelId).then(build);
  }

  /**
   * Gives the model a message's files: images and text are kept with the message (and counted
   * into its estimate), and its placeholders say what each file is, with its size. False when
   * the message is not in history (deleted meanwhile).
   */
  attachFiles(channelId: string, messageId: string, files: readonly ResolvedAttachment[]): Promise<boolean> {
    return this.changes.attachFiles(channelId, messageId, files);
  }

  /** Who wrote a message, as history knows it (undefined when it is not, or no longer, there). */
  async authorOf(channelId: string, messageId: string): Promise<string | undefined> {
    return (await this.store.findByMessageId(channelId, messageId))?.authorId;
  }

  /** A message edited on the platform: its text changes in history, context and archive. */
  editMessage(channelId: string, messageId: string, content: string): Promise<boolean> {
    return this.changes.editMessage(channelId, messageId, content);
  }

  /**
   * Called for each of the bot's own replies that lost the quote of a deleted (or edited)
   * message, so that the platform copy is edited too; returns a function that detaches.
   */
  onReplyRedacted(listener: (reply: RedactedReply) => void): () => void {
    return this.changes.onReplyRedacted(listener);
  }

  /**
   * Starts following, for a turn of the channel about to run, the deletes and edits that reach
   * it: its answer was written from text that may be gone when it is posted or recorded, and is
   * then treated as a stored reply would be (see `TurnWatch`).
   */
  watchTurn(channelId: string): TurnWatch {
    return this.changes.watchTurn(channelId);
  }

  /** Messages deleted on the platform leave history, live context and archive. Returns how many. */
  async deleteMessages(channelId: string, messageIds: string[]): Promise<number> {
    return (await this.changes.removeMessages(channelId, messageIds)).messages;
  }

  /**
   * Erases everything a user wrote, in every channel of this data dir, with the same
   * propagation as a delete. Returns counts only (the audit line carries no content).
   */
  forgetUser(userId: string, requestedFrom: string): Promise<UserErasure> {
    return this.changes.forgetUser(userId, requestedFrom);
  }

  /**
   * `/memory forget` and `magpie memory forget`: an archived message (`msg-…`) is deleted as
   * if deleted on the platform; a memory (`mem-…`) is deleted and its text leaves tool results.
   * With `within`, only what belongs to that channel (a DM: its user).
   */
  forgetItem(id: string, within?: MemoryLocation): Promise<'message' | 'memory' | undefined> {
    return this.changes.forgetItem(id, within);
  }

  /**
   * Reads every loaded channel and persona back from the store (what the runtime does after its
   * change feed reconnected); resolves once applied.
   */
  rereadAll(): Promise<void> {
    return this.storeChanges.rereadAll();
  }

  /** Resolves when the rewrites of summaries and memories started by deletes and edits have landed (tests, the CLI). */
  async privacySettled(): Promise<void> {
    // Rewrites a channel load resumes start after a read of their own.
    while (this.resuming.size > 0) await Promise.all([...this.resuming]);
    await this.privacy.settled();
  }

  async status(channelId: string): Promise<ContextStatus> {
    const state = await this.channel(channelId);
    const status = this.estimator.status(state, this.settings(channelId));
    return state.lastRequest ? { ...status, lastRequest: state.lastRequest } : status;
  }

  /**
   * What a channel request cost, as the model counted it: kept for `/context`, and emitted as
   * `model_usage` (the compaction log keeps it for `status` and the report; metrics count it
   * through the model's observer).
   */
  async recordCost(channelId: string, usage: ModelUsage): Promise<void> {
    const state = await this.channel(channelId);
    state.lastRequest = { at: this.clock.now(), usage };
    this.options.events.emit({ type: 'model_usage', channel_id: channelId, ...usageFields(usage), output_tokens: usage.outputTokens });
  }

  /** The Compactor check, as run after every message and turn. */
  check(channelId: string): Promise<CompactionAction> {
    // A loaded channel is checked inside the call (no I/O, O(1)); only a load waits.
    const loaded = this.states.touch(channelId);
    if (loaded) return this.checked(loaded, this.coordinator.check(loaded));
    return this.channel(channelId).then((state) => this.checked(state, this.coordinator.check(state)));
  }

  /** Resolves with `action` once a truncation it made is written and reported. */
  private checked(state: ChannelState, action: CompactionAction): Promise<CompactionAction> {
    const written = action === 'emergency' ? state.truncationWritten : undefined;
    return written ? written.then(() => action) : Promise.resolve(action);
  }

  /**
   * Starts a compaction early when the channel's prompt cache is cold: nothing touched it for
   * longer than its lifetime (`[llm] prompt_cache`) and usage is at `cold_cache_threshold` or
   * more. The bot's sweep runs it for idle channels; a replay runs it in each long gap of its
   * transcript. Settles when the summary has landed; undefined when there is nothing to do.
   */
  async compactIfCold(channelId: string, now: number = this.clock.now()): Promise<CompactionOutcome | undefined> {
    return this.compactStateIfCold(await this.channel(channelId), now);
  }

  private compactStateIfCold(state: ChannelState, now: number): Promise<CompactionOutcome> | undefined {
    const from = this.settings(state.channelId).compaction.coldCacheThreshold;
    if (!(from > 0) || this.queue.has(state.channelId)) return undefined;
    const coldAt = cacheColdAt(state, this.options.config.current().llm?.promptCache);
    return coldAt !== undefined && now > coldAt ? this.coordinator.compactWhileCold(state, from) : undefined;
  }

  /** When the channel's prompt cache went cold (undefined without caching or activity). */
  async cacheColdAt(channelId: string): Promise<number | undefined> {
    return cacheColdAt(await this.channel(channelId), this.options.config.current().llm?.promptCache);
  }

  /** Compacts the oldest part now (the `/compact` command); settles when the result has landed. */
  async compactNow(channelId: string): Promise<CompactionOutcome> {
    return this.coordinator.compactNow(await this.channel(channelId));
  }

  /**
   * Unloads quiet channels unused for `[runtime] channel_idle_ms` (and any beyond
   * `max_loaded_channels`); runs on a timer too. Returns how many were unloaded.
   */
  unloadIdle(): number {
    // Channels whose prompt cache went cold are compacted now if they are close to due.
    const now = this.clock.now();
    for (const state of this.states.values()) void this.compactStateIfCold(state, now)?.catch(() => {});
    return this.states.evict();
  }

  /** Channels loaded in memory now. */
  get loadedChannels(): number {
    return this.states.size;
  }

  /**
   * Group commits so far: how many, how many writes they carried, the largest, and how many of
   * them SQLite's writer thread ran (benchmarks, tests).
   */
  ingestStats(): { commits: number; writes: number; largestGroup: number; whole: number } {
    return { ...this.writer.stats };
  }

  /**
   * Resolves once no compaction is running or landing: every worker started so far has landed,
   * failed or was abandoned (a worker that never answers keeps it waiting, up to its timeout).
   */
  async compactionsIdle(): Promise<void> {
    await this.coordinator.idle();
    // A landing may have set off a truncation: its write (and any write in flight) ends too.
    for (const state of this.states.values()) {
      if (state.busy) await state.exclusive(async () => {});
      await state.truncationWritten?.catch(() => undefined);
    }
    await this.coordinator.idle();
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
    this.storeChanges.close();
    await this.writer.flush();
    for (const state of this.states.values()) await Promise.allSettled([...state.unsettled.values()]);
    this.unsubscribe();
    if (this.repairTimer) clearInterval(this.repairTimer);
    await this.coordinator.close(this.states.values());
    await this.privacy.close();
    for (const state of this.states.values()) await this.archiver.settled(state);
    await this.archiver.flushFlags();
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

  /**
   * The real count expected for a request of this channel estimated at `estimatedTokens`, of
   * which `addedToolTokens` are tool calls and results a running turn added to the live context.
   */
  calibratedTokens(channelId: string, estimatedTokens: number, addedToolTokens = 0): number {
    const state = this.loadedChannel(channelId);
    return this.estimator.calibrated(state, this.settings(channelId), estimatedTokens, addedToolTokens);
  }

  /** The estimate a request of this channel may reach for its real count to be `realTokens`. */
  estimateFor(channelId: string, realTokens: number, addedToolTokens = 0): number {
    const state = this.loadedChannel(channelId);
    return this.estimator.estimateFor(state, this.settings(channelId), realTokens, addedToolTokens);
  }

  /** The factor of the channel's messages alone (see `Calibration.messageFactor`). */
  messageFactor(channelId: string): number {
    return this.requestFactors(channelId).messages;
  }

  /** What a branch's or a worker's request is corrected by: the messages' factor and the tools'. */
  requestFactors(channelId: string): RequestFactors {
    // A worker may outlive its channel's stay in memory: uncorrected then, until it comes back.
    const state = this.states.touch(channelId);
    return state ? requestFactorsOf(state.calibration) : { ...UNCORRECTED };
  }

  /** What a request of this channel is estimated at now, and the correction that applies. */
  async requestEstimate(channelId: string): Promise<RequestEstimate> {
    return this.estimator.request(await this.channel(channelId), this.settings(channelId));
  }

  /**
   * A model response counted `inputTokens` for a request estimated at `estimatedTokens`: the
   * channel's factor learns from it (smoothed, bounded) and is saved with the channel.
   */
  async recordUsage(channelId: string, estimatedTokens: number, inputTokens: number, addedToolTokens = 0): Promise<void> {
    const state = await this.channel(channelId);
    const settings = this.settings(channelId);
    // Images are only sent (and charged) with vision on.
    const imageTokens = settings.vision ? await this.extras.attachments.imageTokensFrom(channelId, state.entries[0]?.seq ?? state.nextSeq) : 0;
    await this.calibrations.record(state, estimatedTokens, inputTokens, {
      fixed: this.estimator.fixedPart(state, settings),
      imageTokens,
      toolTokens: state.toolTokens + addedToolTokens,
    });
  }

  /**
   * The model refused a request estimated at `estimatedTokens` as too long (`tokens` > `maximum`
   * when the server said): the factor takes the server's count, and the live context is truncated
   * as an emergency would, below the emergency threshold (and below what the server accepts).
   * True when something changed, so a retry can fit.
   */
  async recoverFromOverflow(channelId: string, overflow: { estimatedTokens: number; tokens?: number; maximum?: number }): Promise<boolean> {
    const state = await this.channel(channelId);
    const settings = this.settings(channelId);
    const before = state.calibration.factor;
    const next = await this.calibrations.overflow(state, overflow.estimatedTokens, overflow.tokens);
    // The server's maximum may be below the configured window: the answer's room comes off it too.
    const serverRoom = overflow.maximum === undefined ? Infinity : overflow.maximum - settings.maxResponseTokens;
    const room = Math.min(usableWindow(settings), Math.max(1, serverRoom));
    const ceiling = (settings.compaction.emergencyThreshold * room) / next.factor;
    const truncated = await this.coordinator.truncateNow(state, { ceilingTokens: ceiling, reason: 'context_overflow' });
    return truncated || next.factor > before;
  }

  /** The coordinator's usage hook, passing on the tool tokens each estimate counted. */
  private observeEstimates(observer: EstimateObserver): UsageObserver {
    return { observe: (state, usage, tokens, settings) => observer.observe(state, usage, tokens, settings, this.estimator.toolTokens) };
  }

  private channel(channelId: string): Promise<ChannelState> {
    return this.states.get(channelId);
  }

  /**
   * A channel in use (a turn, a branch or a worker of it is running, so it stays loaded), for
   * the figures a model call's loop asks for synchronously.
   */
  private loadedChannel(channelId: string): ChannelState {
    const state = this.states.touch(channelId);
    if (!state) throw new Error(`channel ${channelId} is not loaded: ask for its figures while a turn of it runs`);
    return state;
  }

  /** Rows the channel's archive holds, as far as this process knows: 0 when it is not loaded. */
  archivedCountIfLoaded(channelId: string): number {
    return this.states.peek(channelId)?.archivedCount ?? 0;
  }

  /** Nothing of the channel is in flight: unloading it now loses nothing a reload would not restore. */
  private isQuiet(state: ChannelState): boolean {
    return (
      state.compaction === undefined &&
      state.unsettled.size === 0 &&
      state.pendingArchives.size === 0 &&
      state.failedArchives.size === 0 &&
      state.unsavedMarkers.size === 0 &&
      state.protectFromSeq === undefined &&
      state.awaitedTurns.size === 0 &&
      !this.queue.has(state.channelId)
    );
  }

  private async load(channelId: string): Promise<ChannelState> {
    const [loaded, calibration, missing] = await Promise.all([
      this.store.load(channelId),
      this.calibrations.load(channelId),
      this.store.unarchived(channelId),
      // Settings (a persona) are read as soon as the channel is.
      this.personas.ready,
    ]);
    const state = new ChannelState(channelId, loaded);
    state.calibration = calibration;
    // Holds taken before the channel was loaded apply, and later ones reach it.
    let awaited = this.awaited.get(channelId);
    if (!awaited) {
      awaited = new Map();
      this.awaited.set(channelId, awaited);
    }
    state.awaitedTurns = awaited;
    // A check held back while a write was in flight runs when it is done.
    state.onIdle = () => void this.coordinator.checkOwed(state);
    // Repairs a crash between the history write and the transcript index write.
    if (missing.length > 0) void this.archiver.archive(state, missing);
    // Summaries that covered a deleted message and still wait for their rewrite.
    const resuming = Promise.resolve()
      .then(() => this.privacy.resume(channelId))
      .catch((error: unknown) => this.options.events.emit({ type: 'privacy_resume_failed', channel_id: channelId, error: errorMessage(error) }));
    this.resuming.add(resuming);
    void resuming.then(() => this.resuming.delete(resuming));
    return state;
  }
}
