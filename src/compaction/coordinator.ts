// Just over 400 lines: the decision, the worker's start and its landing stay together, so the
// order in which a channel's compaction state changes is read in one file.
import type { ChannelLocks } from '../storage/channel-locks.js';
import type { ChannelState, RunningCompaction } from '../context/channel-state.js';
import type { SummaryWrites } from '../context/history-store.js';
import type { HistoryEntry } from '../context/types.js';
import { usageOf } from '../context/calibration.js';
import type { Clock } from '../common/clock.js';
import type { EventStream } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import { decide, type CompactionAction } from './compactor.js';
import type { CompactionOutcome } from './compaction-outcome.js';
import { errorMessage } from '../common/errors.js';
import { truncateInPlace } from './emergency-truncation.js';
import { saveUnsavedMarkers } from './marker-writes.js';
import type { CompactionEvent, CompactionTier } from './events.js';
import { landWorkerOutcome, summaryRoom, type FinishedJob } from './landing.js';
import { planCompaction, planRollUp, type CompactionPlan } from './planner.js';
import type { CompactionScheduler } from './scheduler.js';
import type { Summarizer } from './summarizer.js';
import { runWorker, type WorkerOutcome } from './worker.js';
import { calibrationFields, rollupTokens, roundUsage, summaryInputTokens, transcriptFactor } from './window-figures.js';
import { SUMMARY_LINE_TOKENS } from './summary-prompt.js';

export type { CompactionOutcome } from './compaction-outcome.js';

/** Which Compactor decisions a check may act on (constants: the check allocates nothing). */
const EVERY_TIER = { emergencyOnly: false } as const;
const EMERGENCY_ONLY = { emergencyOnly: true } as const;
const IDLE = { compactionRunning: false } as const;
const RUNNING = { compactionRunning: true } as const;

export interface CompactionCoordinatorOptions {
  store: SummaryWrites;
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
  /**
   * The correction for an estimate of `tokens` now (the channel's calibration with its fixed part
   * apart); absent, the whole-request factor. O(1) and allocation-free: the check runs it.
   */
  factorAt?(state: ChannelState, settings: ChannelSettings, tokens: number): number;
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
  /** Landings under way (a scheduler that holds results starts them later, or never). */
  private readonly landing = new Set<Promise<void>>();
  /** Starts waiting for their channel's compaction lock (another process may hold it). */
  private readonly claiming = new Set<Promise<void>>();

  constructor(private readonly options: CompactionCoordinatorOptions) {}

  /** Runs the check held back while the channel's exclusive section ran (see `ChannelState.checkOwed`). */
  checkOwed(state: ChannelState): CompactionAction {
    const owed = state.checkOwed;
    state.checkOwed = undefined;
    return owed ? this.act(state, owed === 'all' ? EVERY_TIER : EMERGENCY_ONLY) : 'none';
  }

  /** The Compactor check: O(1) unless it acts. Returns what it decided. */
  check(state: ChannelState): CompactionAction {
    return this.act(state, EVERY_TIER);
  }

  private act(state: ChannelState, scope: { emergencyOnly: boolean }): CompactionAction {
    // While a write and its mirror are in flight the state is not to be acted on: the check runs
    // again when that section ends (`ChannelState.onIdle`).
    if (this.closed) return 'none';
    if (state.busy) {
      const owed = scope.emergencyOnly || state.compaction !== undefined ? 'emergency' : 'all';
      state.checkOwed = state.checkOwed === 'all' ? 'all' : owed;
      return 'none';
    }
    // A truncation whose write failed is written again first (one cheap test when none is owed).
    if (state.unsavedMarkers.size > 0) void saveUnsavedMarkers(this.options, state);
    const settings = this.options.settingsFor(state.channelId);
    const tokens = this.options.estimate(state, settings);
    const factor = this.options.factorAt ? this.options.factorAt(state, settings, tokens) : state.calibration.factor;
    const usage = usageOf(tokens, factor, settings);
    this.options.usageChecked?.(usage);
    this.options.usageObserver?.observe(state, usage, tokens, settings);
    const action = decide(usage, settings.compaction, state.compaction === undefined ? IDLE : RUNNING);
    if (action === 'none' || (scope.emergencyOnly && action !== 'emergency')) return 'none';
    if (action === 'emergency' && state.entries.length === 0) return 'none';
    // A worker tier with nothing it may take (a single turn in progress), or with a range too
    // small for any summary to free `min_tokens_freed`, is no action at all.
    const plan = action === 'emergency' ? undefined : this.plan(state, action, settings);
    if (action !== 'emergency' && (!plan || !roomForSummary(plan, settings))) return 'none';
    this.emit({
      type: 'compaction_triggered',
      channel_id: state.channelId,
      action,
      tier: action,
      usage: roundUsage(usage),
      estimated_tokens: tokens,
      ...calibrationFields(state, settings, tokens),
      live_messages: state.entries.length,
    });
    if (action === 'emergency') {
      truncateInPlace(this.options, state, settings, { tokensBefore: tokens });
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
    if (!roomForSummary(plan, settings)) {
      this.emit({ type: 'compaction_skipped', channel_id: state.channelId, tier: 'manual', reason: 'no_gain', range_tokens: plan.tokens });
      return Promise.resolve({ status: 'failed', reason: 'no_gain' });
    }
    return new Promise((resolve) => this.start(state, 'manual', settings, plan, resolve));
  }

  /**
   * A background compaction ahead of its threshold, for a channel whose prompt cache has gone
   * cold: the next request writes the whole cache anyway, so a summary landing now costs no
   * extra cache write, while one landing later, at the threshold, would. Settles when it has
   * landed; undefined when the channel is below `fromUsage`, busy, or has nothing to compact.
   */
  compactWhileCold(state: ChannelState, fromUsage: number): Promise<CompactionOutcome> | undefined {
    if (this.closed || state.compaction !== undefined) return undefined;
    const settings = this.options.settingsFor(state.channelId);
    const tokens = this.options.estimate(state, settings);
    const usage = usageOf(tokens, state.calibration.factor, settings);
    if (usage < fromUsage) return undefined;
    const plan = this.plan(state, 'background', settings);
    if (!plan) return undefined;
    this.emit({
      type: 'compaction_triggered',
      channel_id: state.channelId,
      action: 'background',
      tier: 'background',
      reason: 'cache_cold',
      usage: roundUsage(usage),
      estimated_tokens: tokens,
      ...calibrationFields(state, settings, tokens),
      live_messages: state.entries.length,
    });
    return new Promise((resolve) => this.start(state, 'background', settings, plan, resolve));
  }

  /** Lands everything held by the scheduler. */
  async drain(): Promise<void> {
    // A start still asking for its channel's lock has not reached the scheduler yet.
    while (this.claiming.size > 0) await Promise.allSettled([...this.claiming]);
    await this.options.scheduler.drain();
  }

  /**
   * Resolves once no worker is running or asking for its lock and no result is landing
   * (including any started meanwhile). Results a scheduler holds back (a replay's lag) are not
   * waited for: `drain` them.
   */
  async idle(): Promise<void> {
    while (this.running.size > 0 || this.landing.size > 0 || this.claiming.size > 0) {
      await Promise.allSettled([...this.running.values(), ...this.landing, ...this.claiming]);
    }
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
  async truncateNow(state: ChannelState, options: { ceilingTokens: number; reason: string }): Promise<boolean> {
    // After the writes in flight, whose mirrors would otherwise land on a truncated state.
    if (state.busy) await state.exclusive(async () => {});
    if (this.closed || state.entries.length === 0) return false;
    const settings = this.options.settingsFor(state.channelId);
    const tokens = this.options.estimate(state, settings);
    this.emit({
      type: 'compaction_triggered',
      channel_id: state.channelId,
      action: 'emergency',
      tier: 'emergency',
      reason: options.reason,
      usage: roundUsage(usageOf(tokens, state.calibration.factor, settings)),
      estimated_tokens: tokens,
      ...calibrationFields(state, settings, tokens),
      live_messages: state.entries.length,
    });
    return truncateInPlace(this.options, state, settings, { tokensBefore: tokens, ceilingTokens: options.ceilingTokens });
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
    const bounded = this.summarizerFor(state, settings).boundedByWindow;
    // Summaries over the roll-up threshold but too large to fold in beside messages (a small
    // window) are rolled up on their own; otherwise they would stack until no turn fits.
    if (bounded && state.summaryTokens * 2 >= summaryInputTokens(state, settings)) {
      const rollUp = planRollUp({ summaries: state.summaries, summaryTokens: state.summaryTokens, rollupTokens: rollupTokens(state, settings) });
      if (rollUp && rollUp.tokens <= summaryInputTokens(state, settings)) return rollUp;
    }
    const protectFromSeq = state.protectedFrom();
    return planCompaction({
      entries: state.entries,
      summaries: state.summaries,
      summaryTokens: state.summaryTokens,
      fraction: tier === 'background' ? compaction.backgroundFraction : compaction.aggressiveFraction,
      rollupTokens: rollupTokens(state, settings),
      ...(protectFromSeq !== undefined ? { protectFromSeq } : {}),
      ...(this.summarizerFor(state, settings).boundedByWindow ? { maxTokens: summaryInputTokens(state, settings), lineTokens: SUMMARY_LINE_TOKENS } : {}),
    });
  }

  /** The model, or the extractive stand-in after too many failures in a row. */
  private summarizerFor(state: ChannelState, settings: ChannelSettings): Summarizer {
    const useFallback = state.consecutiveFailures >= settings.compaction.fallbackAfterFailures;
    return useFallback ? this.options.fallbackSummarizer : this.options.summarizer;
  }

  private start(
    state: ChannelState,
    tier: Exclude<CompactionTier, 'emergency'>,
    settings: ChannelSettings,
    plan: CompactionPlan,
    onLanded?: (outcome: CompactionOutcome) => void,
  ): void {
    const locks = this.options.locks;
    if (!locks) {
      this.run(state, tier, settings, plan, onLanded);
      return;
    }
    // Claimed here at once (no second start while the lock is asked for), released if refused.
    const claim: RunningCompaction = { compactionId: `${state.channelId}/lock`, tier, abort: new AbortController() };
    state.compaction = claim;
    const claiming = locks.tryAcquire(state.channelId).then(
      (locked) => {
        if (state.compaction === claim) state.compaction = undefined;
        if (locked && !this.closed) {
          this.run(state, tier, settings, plan, onLanded);
          return;
        }
        if (locked) void locks.release(state.channelId);
        // Another process is compacting this channel: this one waits for a later check.
        this.emit({ type: 'compaction_skipped', channel_id: state.channelId, tier, reason: locked ? 'shutting_down' : 'locked_by_another_process' });
        onLanded?.({ status: 'busy', reason: locked ? 'shutting_down' : 'locked_by_another_process' });
      },
      (error: unknown) => {
        if (state.compaction === claim) state.compaction = undefined;
        this.emit({ type: 'compaction_skipped', channel_id: state.channelId, tier, reason: `lock_error: ${errorMessage(error)}` });
        onLanded?.({ status: 'busy', reason: 'lock_error' });
      },
    );
    this.claiming.add(claiming);
    void claiming.finally(() => this.claiming.delete(claiming));
  }

  private run(
    state: ChannelState,
    tier: Exclude<CompactionTier, 'emergency'>,
    settings: ChannelSettings,
    plan: CompactionPlan,
    onLanded?: (outcome: CompactionOutcome) => void,
  ): void {
    const compaction = settings.compaction;
    this.sequence += 1;
    const compactionId = `${state.channelId}/${this.sequence}`;
    const summarizer = this.summarizerFor(state, settings);
    const abort = new AbortController();
    state.compaction = { compactionId, tier, abort };
    const startedAt = performance.now();
    this.emit({
      type: 'compaction_started',
      channel_id: state.channelId,
      compaction_id: compactionId,
      tier,
      messages: plan.entries.length,
      messages_held: plan.held?.length ?? 0,
      summaries_folded: plan.priorSummaries.length,
      from_seq: plan.fromSeq,
      to_seq: plan.toSeq,
      summarizer: summarizer.name,
    });
    let outcome: WorkerOutcome = { ok: false, reason: 'not_finished' };
    const settled = runWorker({
      summarizer,
      plan,
      maxSummaryTokens: summaryRoom(plan, compaction.minTokensFreed),
      settings: compaction,
      window: { contextWindow: settings.contextWindow, factor: transcriptFactor(state) },
      location: { channelId: state.channelId, ...state.location },
      pendingArchives: [...state.pendingArchives],
      retryFailedArchives: () => this.options.retryFailedArchives(state, plan.entries),
      abort,
    }).then(
      (result) => {
        outcome = result;
      },
      (error: unknown) => {
        outcome = { ok: false, reason: `worker_error: ${errorMessage(error)}` };
      },
    );
    this.running.set(compactionId, settled);
    void settled.finally(() => this.running.delete(compactionId));
    this.options.scheduler.submit({
      channelId: state.channelId,
      compactionId,
      settled,
      land: async () => {
        const landing = this.land(state, { compactionId, tier, plan, outcome, summarizer: summarizer.name, startedAt }).then(onLanded);
        const tracked = landing.then(
          () => undefined,
          () => undefined,
        );
        this.landing.add(tracked);
        void tracked.then(() => this.landing.delete(tracked));
        await landing;
      },
    });
  }

  /**
   * Applies a worker's outcome. Whatever happens, the channel's lock is released here, and
   * nothing escapes: an error while landing is a failed compaction, the channel goes on.
   */
  private async land(state: ChannelState, job: FinishedJob): Promise<CompactionOutcome> {
    const release = (): void => {
      if (state.compaction?.compactionId === job.compactionId) state.compaction = undefined;
    };
    try {
      if (this.closed) {
        release();
        return { status: 'failed', compactionId: job.compactionId, reason: 'shutting_down' };
      }
      // The compaction counts as running until it has landed: a check meanwhile starts no other.
      const landed = await state.exclusive(async () => {
        try {
          return await landWorkerOutcome(this.options, state, job);
        } finally {
          release();
        }
      });
      // A summary that lands in place of a truncation marker adds to the context (the marker's
      // entries had already left it), and the window may have shrunk on reload meanwhile: if the
      // context is over the emergency threshold now, truncate at once rather than let the next
      // request overflow the window. Worker tiers wait for the next check.
      if (landed.status === 'completed') this.act(state, EMERGENCY_ONLY);
      return landed;
    } catch (error) {
      const reason = `landing_error: ${errorMessage(error)}`;
      state.consecutiveFailures += 1;
      this.emit({
        type: 'compaction_failed',
        channel_id: state.channelId,
        compaction_id: job.compactionId,
        tier: job.tier,
        reason,
        consecutive_failures: state.consecutiveFailures,
        summarizer: job.summarizer,
        duration_ms: Math.round(performance.now() - job.startedAt),
      });
      return { status: 'failed', compactionId: job.compactionId, reason };
    } finally {
      // After the splice committed (or was given up): another process may compact it now.
      void this.options.locks?.release(state.channelId).catch((error: unknown) => {
        this.options.events.emit({ type: 'compaction_lock_release_failed', channel_id: state.channelId, error: errorMessage(error) });
      });
    }
  }

  private emit(event: CompactionEvent): void {
    this.options.events.emit(event);
  }
}

/** Below this many tokens of room a summary could not say anything useful. */
const MIN_SUMMARY_ROOM = 16;

/** Whether a summary of `plan` could free `min_tokens_freed` and still say something. */
function roomForSummary(plan: CompactionPlan, settings: ChannelSettings): boolean {
  return summaryRoom(plan, settings.compaction.minTokensFreed) >= MIN_SUMMARY_ROOM;
}
