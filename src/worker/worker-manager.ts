import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '../common/clock.js';
import { ChannelSlots, type TokenAccount } from '../common/channel-slots.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import type { ChatModel, ModelUsage } from '../llm/chat-model.js';
import type { ToolContext, ToolHandler } from '../llm/tool.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { TurnEntryInput } from '../channel/runtime.js';
import { calibratedWindow } from '../branch/branch-tool.js';
import { estimatedRoom } from '../context/request-room.js';
import { UNCORRECTED, type RequestFactors } from '../context/calibration.js';
import { runWorker, type WorkerResult } from './run-worker.js';
import { WorkerStore, type WorkerStatus } from './worker-store.js';
import { addUsage, budgetTokens, usageFields, wholeInputTokens } from '../llm/usage.js';

/** The part of the channel runtime a worker's report needs (`ChannelRuntime` satisfies it). */
export interface WorkerRuntime {
  runSerial<T>(channelId: string, work: () => Promise<T>): Promise<T>;
  appendToTurn(channelId: string, entries: TurnEntryInput[], turnId: number, options?: { alongside?: () => Promise<unknown> }): Promise<unknown>;
  newTurnId(channelId: string): Promise<number>;
}

export interface WorkerManagerOptions {
  db: SqlClient;
  runtime: WorkerRuntime;
  /** Undefined when no model is configured: nothing starts, but interrupted workers are still reported. */
  model: ChatModel | undefined;
  /** memory_search, memory_save and channel_history: a worker has no other tool. */
  tools: ToolHandler[];
  settingsFor: (channelId: string, parentId?: string) => ChannelSettings;
  budget: TokenAccount;
  events: EventStream;
  /** The channel's calibration: its messages' factor (see `calibratedWindow`) and its tools'. */
  calibration?: (channelId: string) => RequestFactors;
  /** Who the bot is, for the report's entry in history. */
  identity?: () => { id: string; name: string } | undefined;
  clock?: Clock;
}

/** A running worker as `/tasks` shows it. */
export interface WorkerInfo {
  id: string;
  channelId: string;
  task: string;
  startedAt: number;
  /** The segment in progress (1-based). */
  segment: number;
  /** Model tokens used so far (input and output). */
  tokens: number;
}

export interface SpawnRequest {
  task: string;
  context: ToolContext;
}

interface Running {
  info: WorkerInfo;
  controller: AbortController;
  /** Why it is being stopped, when we stop it. */
  stopping?: 'cancelled' | 'shutdown';
  cancelledBy?: string;
  done: Promise<void>;
}

/** Longest report kept (Discord splits long posts; history should not carry essays). */
const MAX_REPORT_CHARS = 3500;

/**
 * Starts, lists, cancels and reports background workers. Each worker is a row in SQLite while
 * it runs; its report is posted (a reply to the message that asked) and appended to the
 * channel's history in the channel's serial queue, in the same transaction that closes its
 * row. A row still open at start-up belongs to a worker the process lost: it is reported as
 * interrupted and nothing else of it is applied.
 */
export class WorkerManager {
  private readonly store: WorkerStore;
  private readonly slots = new ChannelSlots();
  private readonly running = new Map<string, Running>();
  private readonly clock: Clock;
  private closed = false;

  constructor(private readonly options: WorkerManagerOptions) {
    this.store = new WorkerStore(options.db);
    this.clock = options.clock ?? systemClock;
  }

  /** Starts a worker; returns its id, or a reason the model can read when it may not start. */
  async spawn(request: SpawnRequest): Promise<{ workerId: string } | { refused: string }> {
    const channelId = request.context.channelId;
    if (this.closed) return { refused: 'Magpie is shutting down; no new workers start' };
    const model = this.options.model;
    if (!model) return { refused: 'no model is configured' };
    const settings = this.options.settingsFor(channelId, request.context.parentChannelId);
    if (this.options.budget.exhausted(channelId, settings.dailyTokenBudget)) {
      return { refused: 'this channel has used up its model budget for today' };
    }
    const release = this.slots.tryAcquire(channelId, settings.worker.maxConcurrent);
    if (!release) {
      const limit = settings.worker.maxConcurrent;
      return { refused: `${limit} worker${limit === 1 ? ' is' : 's are'} already running in this channel (the limit); wait for a report or cancel one with /tasks cancel` };
    }
    const id = `w-${randomUUID().slice(0, 8)}`;
    const startedAt = this.clock.now();
    const requestedBy = request.context.sourceMessageIds?.at(-1);
    try {
      await this.store.insert({ id, channelId, task: request.task, startedAt, ...(requestedBy ? { requestedBy } : {}) });
    } catch (error) {
      release();
      throw error;
    }
    const controller = new AbortController();
    const entry: Running = {
      info: { id, channelId, task: request.task, startedAt, segment: 1, tokens: 0 },
      controller,
      done: Promise.resolve(),
    };
    this.running.set(id, entry);
    this.options.events.emit({ type: 'worker_started', channel_id: channelId, worker_id: id, running: this.slots.inUse(channelId), task_chars: request.task.length });
    entry.done = this.execute(entry, request, settings, model).finally(() => {
      release();
      this.running.delete(id);
    });
    return { workerId: id };
  }

  /** Running workers of a channel, oldest first. */
  async list(channelId: string): Promise<WorkerInfo[]> {
    const entries = [...this.running.values()].filter((entry) => entry.info.channelId === channelId);
    return Promise.all(entries.map(async (entry) => ({ ...entry.info, task: await this.taskOf(entry.info.id, entry.info.task) })));
  }

  /** The task as stored: a deleted message it quoted has been redacted there since it started. */
  private async taskOf(id: string, given: string): Promise<string> {
    return (await this.store.get(id))?.task ?? given;
  }

  /** Stops one worker of this channel; it reports that it was cancelled. False when there is no such worker here. */
  cancel(channelId: string, workerId: string, by?: string): boolean {
    const entry = this.running.get(workerId.trim());
    if (!entry || entry.info.channelId !== channelId || entry.stopping) return false;
    entry.stopping = 'cancelled';
    if (by) entry.cancelledBy = by;
    entry.controller.abort(new Error('cancelled'));
    return true;
  }

  /** Resolves when no worker is running (tests; the terminal at the end of piped input). */
  async idle(channelId?: string): Promise<void> {
    for (;;) {
      const pending = [...this.running.values()].filter((entry) => channelId === undefined || entry.info.channelId === channelId);
      if (pending.length === 0) return;
      await Promise.allSettled(pending.map((entry) => entry.done));
    }
  }

  /**
   * Reports, in each channel's history, the workers that were running when the process
   * stopped. Run once at start-up, before any new worker. Returns how many there were.
   */
  async recoverInterrupted(): Promise<number> {
    const rows = (await this.store.running()).filter((row) => !this.running.has(row.id));
    for (const row of rows) {
      const text = `[worker ${row.id} interrupted] The background task “${clip(row.task, 200)}” was interrupted when Magpie stopped, before it finished; it reported nothing. Ask again to rerun it.`;
      await this.appendReport(row.channelId, text, `magpie-worker-${row.id}`, () => this.store.finish(row.id, 'interrupted', this.clock.now()));
      this.options.events.emit({
        type: 'worker_failed',
        channel_id: row.channelId,
        worker_id: row.id,
        reason: 'interrupted',
        segment: row.segment,
        tokens: row.tokens,
      });
    }
    return rows.length;
  }

  /** Stops every worker without a report: their rows stay open, so the next start reports them interrupted. */
  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.running.values()) {
      entry.stopping = 'shutdown';
      entry.controller.abort(new Error('shutdown'));
    }
    await Promise.allSettled([...this.running.values()].map((entry) => entry.done));
  }

  private async execute(entry: Running, request: SpawnRequest, settings: ChannelSettings, model: ChatModel): Promise<void> {
    const { events, budget } = this.options;
    const { id, channelId } = entry.info;
    const startedAt = this.clock.now();
    const timeout = AbortSignal.timeout(settings.worker.timeoutMs);
    const signal = AbortSignal.any([entry.controller.signal, timeout]);
    const usage: ModelUsage = { inputTokens: 0, outputTokens: 0 };
    const counting: ChatModel = {
      model: model.model,
      createMessage: async (modelRequest, callOptions) => {
        const response = await model.createMessage(modelRequest, { ...callOptions, purpose: 'worker' });
        addUsage(usage, response.usage);
        entry.info.tokens = wholeInputTokens(usage) + usage.outputTokens;
        // A thread spends its parent channel's budget.
        budget.record(request.context.parentChannelId ?? channelId, budgetTokens(response.usage, settings.budgetUnit));
        return response;
      },
    };
    const { signal: _turnSignal, ...turnContext } = request.context;
    // Its own record of what its tools showed: its memories' sources are drawn from that.
    const context = { ...turnContext, agent: 'worker' as const, seenSourceIds: new Set(turnContext.seenSourceIds ?? []), seenSources: new Map<string, string>() };
    let result: WorkerResult | undefined;
    let failure: unknown;
    try {
      result = await runWorker({
        model: counting,
        task: request.task,
        tools: this.options.tools,
        context,
        settings: settings.worker,
        windowTokens: calibratedWindow(settings, this.options.calibration?.(channelId).messages),
        maxTokens: settings.maxResponseTokens,
        room: estimatedRoom({
          contextWindow: settings.contextWindow,
          minTokens: settings.worker.minResponseTokens,
          factor: () => (this.options.calibration?.(channelId) ?? UNCORRECTED).messages,
          toolFactor: () => (this.options.calibration?.(channelId) ?? UNCORRECTED).tools,
        }),
        signal,
        mayContinue: () => !budget.exhausted(channelId, settings.dailyTokenBudget),
        onSegment: (info) => {
          entry.info.segment = info.segment + 1;
          // Only what `/tasks` shows after a restart; the worker goes on whatever happens to it.
          void this.store.progress(id, info.segment, entry.info.tokens).catch((error: unknown) => {
            events.emit({ type: 'worker_progress_failed', channel_id: channelId, worker_id: id, error: errorMessage(error) });
          });
          events.emit({
            type: 'worker_segment',
            channel_id: channelId,
            worker_id: id,
            segment: info.segment,
            turns: info.turns,
            ...usageFields(info.usage),
            output_tokens: info.usage.outputTokens,
            estimated_tokens: info.estimatedTokens,
          });
        },
        onCompacted: (info) =>
          events.emit({
            type: 'worker_compacted',
            channel_id: channelId,
            worker_id: id,
            segment: info.segment,
            before_tokens: info.beforeTokens,
            after_tokens: info.afterTokens,
            dropped_calls: info.droppedCalls,
            dropped_turns: info.droppedTurns,
          }),
      });
    } catch (error) {
      failure = error;
    }
    if (entry.stopping === 'shutdown') return;
    const durationMs = this.clock.now() - startedAt;
    const numbers = {
      channel_id: channelId,
      worker_id: id,
      segments: result?.segments ?? entry.info.segment,
      turns: result?.turns,
      ...usageFields(usage),
      output_tokens: usage.outputTokens,
      duration_ms: durationMs,
    };
    let status: Exclude<WorkerStatus, 'running' | 'interrupted'>;
    let report: string;
    const task = `“${clip(await this.taskOf(id, request.task), 120)}”`;
    if (result?.end === 'completed') {
      status = 'completed';
      report = `[worker ${id} report] Task ${task}:\n${result.text === '' ? '(the worker finished without writing a report)' : result.text}`;
    } else if (result?.end === 'max_segments') {
      status = 'max_segments';
      report = `[worker ${id} stopped] Task ${task} reached its limit of ${settings.worker.maxSegments} segments before finishing.${partial(result.text)}`;
    } else if (result?.end === 'over_budget') {
      status = 'failed';
      report = `[worker ${id} stopped] Task ${task}: the channel's model budget for today ran out.${partial(result.text)}`;
    } else if (entry.stopping === 'cancelled') {
      status = 'cancelled';
      report = `[worker ${id} cancelled] Task ${task} was cancelled${entry.cancelledBy ? ` by ${entry.cancelledBy}` : ''}; it reported nothing.`;
    } else if (timeout.aborted) {
      status = 'timed_out';
      report = `[worker ${id} timed out] Task ${task} did not finish within ${Math.round(settings.worker.timeoutMs / 1000)} s.`;
    } else {
      status = 'failed';
      report = `[worker ${id} failed] Task ${task} failed: ${clip(errorMessage(failure), 300)}`;
    }
    if (status === 'completed' || status === 'max_segments') {
      events.emit({ type: 'worker_completed', ...numbers, status });
    } else {
      events.emit({ type: 'worker_failed', ...numbers, reason: status, ...(failure ? { error: errorMessage(failure) } : {}) });
    }
    await this.deliver(entry, clip(report, MAX_REPORT_CHARS), status, request.context);
  }

  /** Posts the report where the task was asked, then records it in history and closes the row, atomically. */
  private async deliver(entry: Running, report: string, status: Exclude<WorkerStatus, 'running'>, context: ToolContext): Promise<void> {
    const { id, channelId } = entry.info;
    try {
      await this.options.runtime.runSerial(channelId, async () => {
        let postedId: string | undefined;
        if (context.postToChannel) {
          try {
            postedId = await context.postToChannel(report);
          } catch (error) {
            this.options.events.emit({ type: 'reply_failed', channel_id: channelId, worker_id: id, error: errorMessage(error) });
          }
        }
        await this.appendReport(channelId, report, postedId ?? `magpie-worker-${id}`, () => this.store.finish(id, status, this.clock.now()));
      });
    } catch (error) {
      // The row stays open: the next start reports the worker as interrupted rather than lose it.
      this.options.events.emit({ type: 'worker_report_failed', channel_id: channelId, worker_id: id, error: errorMessage(error) });
    }
  }

  /** The report in history and `closeRow` (the task's row marked finished), in one transaction. */
  private async appendReport(channelId: string, text: string, messageId: string, closeRow: () => Promise<unknown>): Promise<void> {
    const self = this.options.identity?.() ?? { id: 'magpie', name: 'Magpie' };
    const turnId = await this.options.runtime.newTurnId(channelId);
    await this.options.runtime.appendToTurn(
      channelId,
      [{ kind: 'message', role: 'assistant', authorId: self.id, authorName: self.name, content: text, messageId }],
      turnId,
      { alongside: closeRow },
    );
  }
}

function partial(text: string): string {
  return text === '' ? ' It reported nothing.' : ` What it had so far:\n${text}`;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
