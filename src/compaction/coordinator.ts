import type { ChannelLocks } from './channel-locks.js';
import type { ChannelState } from '../channel/channel-state.js';
import type { HistoryStore } from '../channel/history-store.js';
import type { HistoryEntry } from '../channel/types.js';
import { usableWindow, usageOf } from '../channel/calibration.js';
import { estimateSummaryTokens, SUMMARY_HEADER_TOKENS } from '../channel/model-request.js';
import type { Clock } from '../common/clock.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import { decide, type CompactionAction } from './compactor.js';
import { filesNote, filesOfPrefix, markerCount, markerFiles, markerText, NO_FILES, truncationCount, withFiles } from './emergency.js';
import type { CompactionEvent, CompactionTier } from './events.js';
import { planCompaction, planRollUp, type CompactionPlan } from './planner.js';
import type { CompactionScheduler } from './scheduler.js';
import { applySplice, matchSnapshot } from './splice.js';
import type { Summarizer } from './summarizer.js';
import { runWorker, type WorkerOutcome } from './worker.js';

/** Appended to a meta-summary that folded a truncation marker, so the hint is not lost. */
const FOLDED_MARKER_NOTE = '(Some older messages were truncated without a summary; recall them with memory_search.)';

/** Which Compactor decisions a check may act on (constants: the check allocates nothing). */
const EVERY_TIER = { emergencyOnly: false } as const;
const EMERGENCY_ONLY = { emergencyOnly: true } as const;

/** How `compactNow` ended. */
export interface CompactionOutcome {
  status: 'completed' | 'failed' | 'replanned' | 'busy' | 'nothing_to_compact';
  compactionId?: string;
  reason?: string;
  messagesCompacted?: number;
  tokensFreed?: number;
}

export interface CompactionCoordinatorOptions {
  store: HistoryStore;
  events: EventStream;
  clock: Clock;
  summarizer: Summarizer;
  fallbackSummarizer: Summarizer;
  scheduler: CompactionScheduler;
  /** The channel's settings now (hot reload applies at the next check). */
  settingsFor(channelId: string): ChannelSettings;
  /**
   * Sends again the entries whose memory archive write failed; true (synchronously when none
   * had) once all are archived, false when one still cannot be: it must not leave the context.
   */
  retryFailedArchives(state: ChannelState, entries: readonly HistoryEntry[]): true | Promise<boolean>;
  /** Estimated tokens of what the model would be sent now for this channel. */
  estimate(state: ChannelState, settings: ChannelSettings): number;
  /** Sees the usage of every check (metrics); must be cheap, it runs after every message. */
  usageChecked?: (usage: number) => void;
  /** Sees the usage of every check (the compaction log samples it); cheap, never throws. */
  usageObserver?: UsageObserver;
  /** Cross-process exclusion on a shared store; absent, this process is the only writer. */
  locks?: ChannelLocks;
}

/** Watches usage at each check (the compaction log); must stay cheap, it runs after every message. */
export interface UsageObserver {
  observe(state: ChannelState, usage: number, estimatedTokens: number, settings: ChannelSettings): void;
}

/**
 * Runs the Compactor's decisions for every channel: emergency truncation in place, workers in
 * the background (one per channel), and the compare-and-swap landing of their results.
 */
export class CompactionCoordinator {
  private sequence = 0;
  private closed = false;
  private readonly running = new Map<string, Promise<void>>();

  constructor(private readonly options: CompactionCoordinatorOptions) {}

  /** The Compactor check: O(1) unless it acts. Returns what it decided. */
  check(state: ChannelState): CompactionAction {
    return this.act(state, EVERY_TIER);
  }

  private act(state: ChannelState, scope: { emergencyOnly: boolean }): CompactionAction {
    if (this.closed) return 'none';
    const settings = this.options.settingsFor(state.channelId);
    const tokens = this.options.estimate(state, settings);
    const usage = usageOf(tokens, state.calibration.factor, settings);
    this.options.usageChecked?.(usage);
    this.options.usageObserver?.observe(state, usage, tokens, settings);
    const action = decide(usage, settings.compaction, { compactionRunning: state.compaction !== undefined });
    if (action === 'none' || (scope.emergencyOnly && action !== 'emergency')) return 'none';
    if (action === 'emergency' && state.entries.length === 0) return 'none';
    // A worker tier with nothing it may take (a single turn in progress) is no action at all.
    const plan = action === 'emergency' ? undefined : this.plan(state, action, settings);
    if (action !== 'emergency' && !plan) return 'none';
    this.emit({
      type: 'compaction_triggered',
      channel_id: state.channelId,
      action,
      tier: action,
      usage: round(usage),
      estimated_tokens: tokens,
      ...calibrationFields(state, settings, tokens),
      live_messages: state.entries.length,
    });
    if (action === 'emergency') {
      this.truncate(state, settings, tokens);
      this.rollUpIfStuck(state, settings);
    } else {
      this.start(state, action, settings, plan!);
    }
    return action;
  }

  /** Starts a compaction now (the `/compact` command); settles when its result has landed. */
  compactNow(state: ChannelState): Promise<CompactionOutcome> {
    if (state.compaction) return Promise.resolve({ status: 'busy', compactionId: state.compaction.compactionId });
    const settings = this.options.settingsFor(state.channelId);
    const plan = this.plan(state, 'manual', settings);
    if (!plan) return Promise.resolve({ status: 'nothing_to_compact' });
    return new Promise((resolve) => this.start(state, 'manual', settings, plan, resolve));
  }

  /** Lands everything held by the scheduler. */
  drain(): Promise<void> {
    return this.options.scheduler.drain();
  }

  /** Abandons running workers (their results will not land) and waits for them to stop. */
  async close(states: Iterable<ChannelState>): Promise<void> {
    this.closed = true;
    for (const state of states) state.compaction?.abort.abort(new Error('shutting down'));
    await Promise.all([...this.running.values()]);
  }

  /**
   * Emergency truncation whatever the usage (the model refused a request as too long): frees
   * room until the estimate is at most `ceilingTokens` (uncalibrated). False when nothing is live.
   */
  truncateNow(state: ChannelState, options: { ceilingTokens: number; reason: string }): boolean {
    if (this.closed || state.entries.length === 0) return false;
    const settings = this.options.settingsFor(state.channelId);
    const tokens = this.options.estimate(state, settings);
    this.emit({
      type: 'compaction_triggered',
      channel_id: state.channelId,
      action: 'emergency',
      tier: 'emergency',
      reason: options.reason,
      usage: round(usageOf(tokens, state.calibration.factor, settings)),
      estimated_tokens: tokens,
      ...calibrationFields(state, settings, tokens),
      live_messages: state.entries.length,
    });
    this.truncate(state, settings, tokens, options.ceilingTokens);
    return true;
  }

  /** Emergency: synchronous, in memory plus one small transaction; always frees room. */
  private truncate(state: ChannelState, settings: ChannelSettings, tokensBefore: number, ceilingTokens?: number): void {
    const startedAt = performance.now();
    const entries = state.entries;
    // Back-to-back truncations grow the newest marker instead of stacking markers without
    // bound (a window too small for the prompt truncates on every message). Not while a worker
    // is in flight: its summary must be able to land on a marker of exactly its own range.
    const newest = state.summaries[state.summaries.length - 1];
    const extended = newest?.kind === 'marker' && state.compaction === undefined ? newest : undefined;
    const earlier = extended ? markerCount(extended.content) : 0;
    const earlierFiles = extended ? markerFiles(extended.content) : NO_FILES;
    const filesOf = filesOfPrefix(entries);
    const textFor = (dropped: number) => markerText(earlier + dropped, withFiles(earlierFiles, filesOf(dropped)));
    const fromSeq = extended ? extended.fromSeq : entries[0]!.seq;
    // The first summary also brings the header that introduces summaries in the system prompt.
    const headerTokens = state.summaries.length === 0 ? SUMMARY_HEADER_TOKENS : 0;
    const markerTokens = (dropped: number) =>
      headerTokens -
      (extended?.tokens ?? 0) +
      estimateSummaryTokens({ kind: 'marker', fromSeq, toSeq: entries[dropped - 1]!.seq, content: textFor(dropped) });
    // Below the emergency threshold afterwards, or the very next request could overflow the window.
    const ceiling = Math.min(ceilingTokens ?? Infinity, emergencyCeiling(state, settings));
    const mustFree = Math.max(0, tokensBefore - ceiling);
    const protectFrom = state.protectFromSeq === undefined ? undefined : firstIndexFrom(state.entries, state.protectFromSeq);
    const count = truncationCount(state.entries, settings.compaction.emergencyFraction, {
      markerTokens,
      mustFree,
      ...(protectFrom === undefined ? {} : { protectFrom }),
    });
    const dropped = state.entries.slice(0, count);
    // Transcript writes that failed are sent again before these leave the context (the store
    // keeps their text searchable even while the embedder is down).
    void this.options.retryFailedArchives(state, dropped);
    const draft = {
      channelId: state.channelId,
      kind: 'marker' as const,
      fromSeq,
      toSeq: dropped[count - 1]!.seq,
      content: textFor(count),
      createdAt: extended?.createdAt ?? this.options.clock.now(),
    };
    const marker = { ...draft, tokens: estimateSummaryTokens(draft) };
    let id: number;
    if (extended) {
      id = extended.id;
      this.options.store.extendMarker(state.channelId, { id, toSeq: marker.toSeq, content: marker.content, tokens: marker.tokens });
      state.removeHead(count);
      state.replaceSummary({ id, ...marker });
      state.markerEntries.set(id, [...(state.markerEntries.get(id) ?? []), ...dropped]);
    } else {
      id = this.options.store.truncate(state.channelId, { toSeq: marker.toSeq }, marker);
      state.removeHead(count);
      state.addSummary({ id, ...marker });
      state.markerEntries.set(id, dropped);
    }
    state.lastCompaction = { tier: 'emergency', at: this.options.clock.now(), messages: count };
    const tokensAfter = this.options.estimate(state, settings);
    this.emit({
      type: 'emergency_truncation',
      channel_id: state.channelId,
      marker_id: id,
      messages_dropped: count,
      tokens_freed: tokensBefore - tokensAfter,
      usage_before: round(usageOf(tokensBefore, state.calibration.factor, settings)),
      usage_after: round(usageOf(tokensAfter, state.calibration.factor, settings)),
      calibration_factor: state.calibration.factor,
      preempted_worker: state.compaction !== undefined,
      merged_into_marker: extended !== undefined,
      // Emergency work runs inside the turn: operators watch that it stays small.
      duration_ms: Math.round((performance.now() - startedAt) * 1000) / 1000,
    });
  }

  /**
   * When a truncation had to drop every live entry and the context is still over the emergency
   * threshold, the summaries are what fills it (the window shrank on reload). Every message would
   * be truncated and no worker tier would ever be reached, so a roll-up of the summaries starts
   * here, under the aggressive tier.
   */
  private rollUpIfStuck(state: ChannelState, settings: ChannelSettings): void {
    if (state.compaction !== undefined || state.entries.length > 0) return;
    const tokens = this.options.estimate(state, settings);
    if (usageOf(tokens, state.calibration.factor, settings) < settings.compaction.emergencyThreshold) return;
    const plan = planRollUp({
      summaries: state.summaries,
      summaryTokens: state.summaryTokens,
      rollupTokens: rollupTokens(state, settings),
    });
    if (plan) this.start(state, 'aggressive', settings, plan);
  }

  private plan(state: ChannelState, tier: Exclude<CompactionTier, 'emergency'>, settings: ChannelSettings): CompactionPlan | undefined {
    const compaction = settings.compaction;
    return planCompaction({
      entries: state.entries,
      summaries: state.summaries,
      summaryTokens: state.summaryTokens,
      fraction: tier === 'background' ? compaction.backgroundFraction : compaction.aggressiveFraction,
      rollupTokens: rollupTokens(state, settings),
      ...(state.protectFromSeq !== undefined ? { protectFromSeq: state.protectFromSeq } : {}),
    });
  }

  private start(
    state: ChannelState,
    tier: Exclude<CompactionTier, 'emergency'>,
    settings: ChannelSettings,
    plan: CompactionPlan,
    onLanded?: (outcome: CompactionOutcome) => void,
  ): void {
    const compaction = settings.compaction;
    if (this.options.locks && !this.options.locks.tryAcquire(state.channelId)) {
      // Another process is compacting this channel: this one waits for a later check.
      this.emit({ type: 'compaction_skipped', channel_id: state.channelId, tier, reason: 'locked_by_another_process' });
      onLanded?.({ status: 'busy', reason: 'locked_by_another_process' });
      return;
    }
    this.sequence += 1;
    const compactionId = `${state.channelId}/${this.sequence}`;
    const useFallback = state.consecutiveFailures >= compaction.fallbackAfterFailures;
    const summarizer = useFallback ? this.options.fallbackSummarizer : this.options.summarizer;
    const abort = new AbortController();
    state.compaction = { compactionId, tier, abort };
    const startedAt = performance.now();
    this.emit({
      type: 'compaction_started',
      channel_id: state.channelId,
      compaction_id: compactionId,
      tier,
      messages: plan.entries.length,
      summaries_folded: plan.priorSummaries.length,
      from_seq: plan.fromSeq,
      to_seq: plan.toSeq,
      summarizer: summarizer.name,
    });
    let outcome: WorkerOutcome = { ok: false, reason: 'not_finished' };
    const settled = runWorker({
      summarizer,
      plan,
      settings: compaction,
      location: { channelId: state.channelId, ...state.location },
      pendingArchives: [...state.pendingArchives],
      retryFailedArchives: () => this.options.retryFailedArchives(state, plan.entries),
      abort,
    }).then((result) => {
      outcome = result;
    });
    this.running.set(compactionId, settled);
    void settled.finally(() => this.running.delete(compactionId));
    this.options.scheduler.submit({
      channelId: state.channelId,
      compactionId,
      settled,
      land: () => {
        const landed = this.land(state, { compactionId, tier, plan, outcome, summarizer: summarizer.name, startedAt });
        onLanded?.(landed);
      },
    });
  }

  /** Applies a worker's outcome. Whatever happens, the channel's lock is released here. */
  private land(
    state: ChannelState,
    job: {
      compactionId: string;
      tier: Exclude<CompactionTier, 'emergency'>;
      plan: CompactionPlan;
      outcome: WorkerOutcome;
      summarizer: string;
      startedAt: number;
    },
  ): CompactionOutcome {
    const { compactionId } = job;
    if (state.compaction?.compactionId === compactionId) state.compaction = undefined;
    try {
      return this.apply(state, job);
    } finally {
      // After the splice committed (or was given up): another process may compact it now.
      this.options.locks?.release(state.channelId);
    }
  }

  private apply(
    state: ChannelState,
    job: {
      compactionId: string;
      tier: Exclude<CompactionTier, 'emergency'>;
      plan: CompactionPlan;
      outcome: WorkerOutcome;
      summarizer: string;
      startedAt: number;
    },
  ): CompactionOutcome {
    const { compactionId, tier, plan, outcome } = job;
    if (this.closed) return { status: 'failed', compactionId, reason: 'shutting_down' };
    // A measurement, not a time of day: it stays on the monotonic clock even when replay drives `clock`.
    const duration = Math.round(performance.now() - job.startedAt);
    const base = { channel_id: state.channelId, compaction_id: compactionId, tier };
    const settings = this.options.settingsFor(state.channelId);
    const fail = (reason: string): CompactionOutcome => {
      state.consecutiveFailures += 1;
      this.emit({
        type: 'compaction_failed',
        ...base,
        reason,
        consecutive_failures: state.consecutiveFailures,
        summarizer: job.summarizer,
        duration_ms: duration,
      });
      return { status: 'failed', compactionId, reason };
    };
    if (!outcome.ok) return fail(outcome.reason);

    const match = matchSnapshot(state, plan);
    if (match.place === 'gone') {
      this.emit({ type: 'compaction_replanned', ...base, reason: match.reason });
      return { status: 'replanned', compactionId, reason: match.reason };
    }
    let content = outcome.summary;
    const folded = plan.priorSummaries.filter((summary) => summary.kind === 'marker');
    if (folded.length > 0) {
      // The files the folded markers named stay named.
      const files = folded.map((marker) => markerFiles(marker.content)).reduce((all, next) => withFiles(all, next.named, next.more), NO_FILES);
      content = `${content}\n${FOLDED_MARKER_NOTE}${files.named.length > 0 ? ` ${filesNote(files)}` : ''}`;
    }
    // A summary as large as what it replaces would not free room and would trigger again at once.
    if (estimateSummaryTokens({ kind: 'summary', fromSeq: plan.fromSeq, toSeq: plan.toSeq, content }) >= plan.tokens) {
      return fail('summary_too_long');
    }
    const tokensBefore = this.options.estimate(state, settings);
    let summary;
    try {
      summary = applySplice({ state, store: this.options.store, plan, match, content, summarizer: job.summarizer, now: this.options.clock.now() });
    } catch (error) {
      return fail(`storage_error: ${errorMessage(error)}`);
    }
    state.consecutiveFailures = 0;
    const tokensAfter = this.options.estimate(state, settings);
    state.lastCompaction = {
      tier,
      at: this.options.clock.now(),
      messages: plan.entries.length,
    };
    this.emit({
      type: 'compaction_completed',
      ...base,
      messages_compacted: plan.entries.length,
      summaries_folded: plan.priorSummaries.length,
      replaced_marker: match.place === 'marker',
      tokens_before: tokensBefore,
      tokens_after: tokensAfter,
      tokens_freed: tokensBefore - tokensAfter,
      summary_tokens: summary.tokens,
      memories_saved: outcome.memoriesSaved,
      duration_ms: duration,
      summarizer: job.summarizer,
    });
    // A summary that lands in place of a truncation marker adds to the context (the marker's
    // entries had already left it), and the window may have shrunk on reload meanwhile: if the
    // context is over the emergency threshold now, truncate at once rather than let the next
    // request overflow the window. Worker tiers wait for the next check.
    this.act(state, EMERGENCY_ONLY);
    return {
      status: 'completed',
      compactionId,
      messagesCompacted: plan.entries.length,
      tokensFreed: tokensBefore - tokensAfter,
    };
  }

  private emit(event: CompactionEvent): void {
    this.options.events.emit(event);
  }
}

/** Index of the first entry with a seq at or after `seq` (entries ascend by seq). */
function firstIndexFrom(entries: readonly HistoryEntry[], seq: number): number {
  let low = 0;
  let high = entries.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (entries[middle]!.seq < seq) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** The emergency threshold in uncalibrated tokens: what a truncation must get below. */
function emergencyCeiling(state: ChannelState, settings: ChannelSettings): number {
  return (settings.compaction.emergencyThreshold * usableWindow(settings)) / state.calibration.factor;
}

/** The roll-up threshold in uncalibrated tokens (summaries are estimated like messages). */
function rollupTokens(state: ChannelState, settings: ChannelSettings): number {
  return (settings.compaction.rollupThreshold * usableWindow(settings)) / state.calibration.factor;
}

/** What the events say about the window and the calibration behind a usage figure. */
function calibrationFields(state: ChannelState, settings: ChannelSettings, tokens: number) {
  return {
    context_window: settings.contextWindow,
    usable_window: usableWindow(settings),
    calibration_factor: state.calibration.factor,
    calibrated_tokens: Math.round(tokens * state.calibration.factor),
  };
}

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
