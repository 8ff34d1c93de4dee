/*
 * Just over 400 lines: a request is held, guarded, queued or folded into the waiting turn, and
 * answered here, and the order of those steps (what holds a message live, and until when) is
 * read in one file.
 */
import { systemClock, type Clock } from '../common/clock.js';
import { errorMessage, MagpieError } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { LiveConfig } from '../config/live-config.js';
import type { ChatModel } from '../llm/chat-model.js';
import type { ToolContext, ToolHandler } from '../llm/tool.js';
import { runAgentTurn, type AgentIdentity, type AgentRuntime } from '../channel/agent-turn.js';
import type { TurnWatch } from '../channel/turn-watches.js';
import { DailyTokenBudget, UserRateLimiter } from './cost-guards.js';
import { withSourceCheck } from '../privacy/source-check.js';
import { usageFields } from '../llm/usage.js';

/** Where a turn's answer goes: a Discord channel, the terminal. */
export interface ReplyTarget {
  /** Posts the text (chunked as the platform needs); returns the id of the first message. */
  send(text: string): Promise<string | undefined>;
  /** Shows that the bot is working; returns a function that stops showing it. */
  startTyping?(): () => void;
  /**
   * A reply shown while it is written; targets that cannot edit what they posted leave it out.
   * `redact` is applied to every text before it is shown (quotes of messages deleted or edited
   * meanwhile taken out); it may change while the reply is shown (see `ReplyStream.refresh`).
   */
  stream?(options?: { redact?: (text: string) => string }): ReplyStream;
}

/** A reply that appears as it is generated (see `StreamedReply` for Discord). */
export interface ReplyStream {
  /** The whole text so far; cheap, may be called for every delta. */
  update(text: string): void;
  /** Shows exactly `text` and returns the id of the first message. */
  finish(text: string): Promise<string | undefined>;
  /**
   * The answer broke off: ends what is shown with `note`. False when nothing was shown (the
   * caller then says sorry the usual way).
   */
  fail(note: string): Promise<boolean>;
  /** The id of the first message once it is posted (history records the reply under it). */
  readonly firstMessageId?: string | undefined;
  /**
   * What `redact` returns changed: what is shown follows it (every part, edited at the usual
   * pace), also once finished. Resolves when the screen matches.
   */
  refresh?(): Promise<void>;
}

/** Ends a streamed reply whose model call failed midway, instead of a dangling half-sentence. */
export const STREAM_BROKEN_NOTE = '*(the answer was cut off here: the model stopped responding; please ask again)*';

/** The runtime as the responder needs it: an agent turn plus the per-channel serial queue. */
export interface ResponderRuntime extends AgentRuntime {
  runSerial<T>(channelId: string, work: () => Promise<T>): Promise<T>;
  /** Keeps a message to be answered live until released (see `ChannelRuntime.awaitAnswer`). */
  awaitAnswer(channelId: string, turnId: number): () => void;
  /** Follows the deletes and edits that reach the channel while a turn runs (see `TurnWatch`). */
  watchTurn?(channelId: string): TurnWatch;
  /** Messages deleted in Discord leave history (see `ChannelRuntime.deleteMessages`). */
  deleteMessages?(channelId: string, messageIds: string[]): unknown;
}

export interface TurnRequest {
  channelId: string;
  /** For threads: the parent channel, whose settings apply when the thread has none. */
  parentId?: string;
  /** Who triggered the turn (rate limit). */
  userId: string;
  /** The turn being answered. */
  turnId?: number;
  /**
   * The turns of every message the request answers (a burst of triggers), `turnId` alone when
   * absent: they stay live, uncompacted, from the call until the turn has run.
   */
  answers?: readonly number[];
  /** The per-user rate limit applies unless false (the terminal has one trusted user). */
  rateLimit?: boolean;
  context: ToolContext;
  target: ReplyTarget;
}

/** A turn queued behind the running one: the request it will answer, and what it holds live (see `holdAnswers`). */
interface WaitingTurn {
  request: TurnRequest;
  holds: Array<() => void>;
}

/** `coalesced`: folded into a turn already waiting in the same channel, which answers for both. */
export type TurnOutcome = 'replied' | 'no_model' | 'rate_limited' | 'over_budget' | 'failed' | 'stopped' | 'coalesced';

/** Source message ids one coalesced turn keeps at most. */
const MAX_COALESCED_SOURCES = 50;

export interface ChannelResponderOptions {
  runtime: ResponderRuntime;
  /** Undefined when no model is configured: messages are still recorded, nobody answers. */
  model: ChatModel | undefined;
  tools: ToolHandler[];
  config: LiveConfig;
  events: EventStream;
  clock?: Clock;
  self?: AgentIdentity;
  /** Shared with branches and workers, whose tokens count against the same daily budget (kept in SQLite by the app). */
  budget?: DailyTokenBudget;
}

/** How long shutdown waits for turns after aborting them. */
const ABORTED_TURN_WAIT_MS = 2000;

export const APOLOGY_REPLY = 'Sorry, I could not come up with an answer just now. Please try again in a moment.';

/**
 * Runs channel agent turns the same way for every adapter: cost guards first (per-user rate
 * limit, per-channel daily token budget), then the turn inside the channel's serial queue with
 * a typing indicator, and a short apology instead of an error when the model fails. Turns of
 * different channels run concurrently; the model's own concurrency cap bounds the calls.
 */
export class ChannelResponder {
  private readonly limiter: UserRateLimiter;
  private readonly budget: DailyTokenBudget;
  /** When each user was last told about the rate limit, so the notice is not itself spam. */
  private readonly warnedAt = new Map<string, number>();
  private readonly running = new Set<Promise<unknown>>();
  private readonly abort = new AbortController();
  private stopped = false;
  private self: AgentIdentity | undefined;
  /**
   * Per channel, the turn queued behind the running one, not started yet. A new request folds
   * into it instead of queueing another turn: a flood into one channel costs at most one running
   * and one waiting turn, and the waiting one answers the newest message with the whole context.
   */
  private readonly waiting = new Map<string, WaitingTurn>();

  constructor(private readonly options: ChannelResponderOptions) {
    this.self = options.self;
    this.limiter = new UserRateLimiter(options.clock ?? systemClock);
    this.budget = options.budget ?? new DailyTokenBudget(options.clock ?? systemClock);
  }

  /** Who the bot is, once the platform has said (Discord: after login). */
  setIdentity(self: AgentIdentity): void {
    this.self = self;
  }

  /** Who the bot is, once known. */
  get identity(): AgentIdentity | undefined {
    return this.self;
  }

  get hasModel(): boolean {
    return this.options.model !== undefined;
  }

  /** Turns in progress (queued or running). */
  get pending(): number {
    return this.running.size;
  }

  respond(request: TurnRequest): Promise<TurnOutcome> {
    // Callers fire and forget: whatever escapes the turn (a database error while checking the
    // budget, say) is reported here and never becomes an unhandled rejection.
    const work = this.respondNow(request).catch((error: unknown): TurnOutcome => {
      this.options.events.emit({
        type: 'agent_turn_failed',
        channel_id: request.channelId,
        error: errorMessage(error),
        code: error instanceof MagpieError ? error.code : 'unexpected',
      });
      return 'failed';
    });
    this.running.add(work);
    void work.then(() => this.running.delete(work));
    return work;
  }

  /** Resolves when no turn is queued or running. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }

  /**
   * Stops taking turns and waits up to `graceMs` for the running ones; turns still running
   * after that are aborted (their model calls cancelled, nothing half-written appended).
   */
  async drain(graceMs: number): Promise<void> {
    this.stopped = true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), graceMs);
    });
    const finished = await Promise.race([Promise.allSettled([...this.running]).then(() => 'done' as const), timeout]);
    clearTimeout(timer);
    if (finished === 'timeout') {
      this.abort.abort(new MagpieError('shutdown', 'shutting down'));
      // An aborted turn may still sit in a REST retry to Discord: give it a moment, no more,
      // so that shutdown stays bounded whatever the network does.
      const settled = await Promise.race([
        Promise.allSettled([...this.running]).then(() => true),
        new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), ABORTED_TURN_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
      if (!settled) {
        this.options.events.emit({ type: 'shutdown_turns_abandoned', turns: this.running.size });
      }
    }
  }

  private async respondNow(request: TurnRequest): Promise<TurnOutcome> {
    // Held from the moment it is asked (this runs before the first await): no worker summarizes
    // the messages it answers, nor a truncation drops them, before its turn has read them.
    const held = this.holdAnswers(request);
    let handedOver = false;
    try {
      return await this.queueTurn(request, held, () => (handedOver = true));
    } finally {
      if (!handedOver) held();
    }
  }

  /** The guards, then the turn queued (or folded into the waiting one, which takes over `held`). */
  private async queueTurn(request: TurnRequest, held: () => void, handOver: () => void): Promise<TurnOutcome> {
    const { config, events, runtime } = this.options;
    const { channelId } = request;
    const target = request.target;
    if (this.stopped) return 'stopped';
    const model = this.options.model;
    if (!model) return 'no_model';

    const perMinute = config.current().discord.userTurnsPerMinute;
    if (request.rateLimit !== false && !this.limiter.tryAcquire(request.userId, perMinute)) {
      events.emit({ type: 'turn_rate_limited', channel_id: channelId, user_id: request.userId, per_minute: perMinute });
      const now = (this.options.clock ?? systemClock).now();
      const warned = this.warnedAt.get(request.userId);
      if (warned === undefined || now - warned >= 60_000) {
        this.warnedAt.set(request.userId, now);
        const seconds = this.limiter.retryAfterSeconds(request.userId);
        await this.safeSend(target, channelId, `You are sending me requests faster than I can take them (at most ${perMinute} a minute). Please try again in ${seconds} s.`);
      }
      return 'rate_limited';
    }

    if (await this.overBudget(request)) return 'over_budget';

    const queued = this.waiting.get(channelId);
    if (queued) {
      queued.request = coalesce(queued.request, request);
      queued.holds.push(held);
      handOver();
      this.options.events.emit({ type: 'turn_coalesced', channel_id: channelId });
      return 'coalesced';
    }
    const waiting: WaitingTurn = { request, holds: [held] };
    this.waiting.set(channelId, waiting);
    handOver();
    const releaseAll = (): void => {
      for (const release of waiting.holds) release();
    };
    try {
      return await runtime.runSerial(channelId, async () => {
        // The newest request folded into this turn while it waited.
        if (this.waiting.get(channelId) === waiting) this.waiting.delete(channelId);
        try {
          return await this.runTurn(waiting.request, model);
        } finally {
          // Before the check that follows the turn, which may then compact what it answered.
          releaseAll();
        }
      });
    } finally {
      // Also when the turn never ran (its channel could not be loaded).
      if (this.waiting.get(channelId) === waiting) this.waiting.delete(channelId);
      releaseAll();
    }
  }

  /** One turn, run in the channel's queue. */
  private async runTurn(request: TurnRequest, model: ChatModel): Promise<TurnOutcome> {
    const { config, events, runtime } = this.options;
    const { channelId, target } = request;
    if (this.abort.signal.aborted) return 'stopped';
    // Checked again in the queue: the turns ahead of this one may have spent the budget.
    if (await this.overBudget(request)) return 'over_budget';
    // Settings are read now, not at arrival: a hot reload applies to the next turn.
    const settings = config.settingsFor(channelId, request.parentId);
    let stopTyping = target.startTyping?.() ?? (() => {});
    // Deletes and edits that reach the channel from now on are taken out of the answer: from
    // what the turn records, and (unless `[privacy] edit_own_replies = false` leaves what the
    // bot posts alone) from what it posts and has posted.
    const watch = runtime.watchTurn?.(channelId);
    const shownWatch = config.current().privacy?.editOwnReplies === false ? undefined : watch;
    const stream = settings.streamReplies ? target.stream?.(shownWatch ? { redact: (text) => shownWatch.redact(text) } : undefined) : undefined;
    if (shownWatch && stream?.refresh) {
      shownWatch.onChange(() => {
        void stream.refresh!().catch(() => {});
      });
    }
    let finishing: Promise<unknown> | undefined;
    let deliveredId: string | undefined;
    const startedAt = Date.now();
    try {
      const result = await runAgentTurn({
        runtime,
        channelId,
        model,
        tools: this.options.tools,
        settings,
        // A worker started in this turn reports back where it was asked; memory_save takes
        // its sources from the live context only.
        context: withSourceCheck(
          {
            ...request.context,
            ...(request.parentId ? { parentChannelId: request.parentId } : {}),
            postToChannel: request.context.postToChannel ?? ((text) => target.send(text)),
          },
          (await runtime.liveContext(channelId)).entries,
        ),
        ...(request.turnId === undefined ? {} : { turnId: request.turnId }),
        ...(this.self ? { self: this.self } : {}),
        deliver: async (reply) => {
          stopTyping();
          if (!stream) {
            const text = shownWatch ? shownWatch.redact(reply) : reply;
            const id = await target.send(text);
            if (id !== undefined) shownWatch?.posted(id, text);
            deliveredId = id;
            return id;
          }
          const finished = stream.finish(reply);
          finishing = finished;
          // Observed at once: its failure (the message deleted, an edit refused) may come while the
          // turn still records the reply, and an unobserved rejection ends the process. The turn
          // reports it when it awaits `finishing`.
          void finished.catch(() => {});
          // The first part is on screen already: history records the reply now, under its id,
          // while the last edits (at most one a second) land; a message arriving meanwhile
          // then comes after the reply in history, as it did on screen.
          const id = stream.firstMessageId ?? (await finished);
          if (id !== undefined) shownWatch?.posted(id);
          deliveredId = id;
          return id;
        },
        signal: this.abort.signal,
        // What the model is sent follows the changes whatever is shown (`edit_own_replies`).
        ...(watch ? { watch } : {}),
        ...(stream
          ? {
              stream: {
                update: (shown: string) => {
                  stopTyping();
                  stopTyping = () => {};
                  stream.update(shown);
                },
                // Text on screen stopped the indicator; tools may take a while, so it comes back.
                toolsRunning: () => {
                  stopTyping();
                  stopTyping = target.startTyping?.() ?? (() => {});
                },
              },
            }
          : {}),
      });
      if (finishing) await finishing.catch((error: unknown) => events.emit({ type: 'reply_failed', channel_id: channelId, error: errorMessage(error) }));
      // Deleted in Discord before the turn recorded it (a moderator took it down while it was
      // streaming): it leaves history now, as a finished reply deleted in Discord does.
      const id = deliveredId;
      if (id !== undefined && watch?.changes().some((change) => change.mode === 'delete' && change.removed.some((message) => message.messageId === id))) {
        try {
          await runtime.deleteMessages?.(channelId, [id]);
        } catch (error) {
          // Logged as a live delete that failed would be; the reply itself went out.
          events.emit({ type: 'discord_event_failed', handler: 'message_delete', channel_id: channelId, error: errorMessage(error) });
        }
      }
      try {
        this.budget.record(budgetKey(request), result.spentTokens);
      } catch (error) {
        // The reply went out; only its count toward the budget is missing.
        events.emit({ type: 'budget_record_failed', channel_id: channelId, tokens: result.spentTokens, error: errorMessage(error) });
      }
      events.emit({
        type: 'agent_turn_completed',
        channel_id: channelId,
        steps: result.steps,
        ...usageFields(result.usage),
        output_tokens: result.usage.outputTokens,
        reply_chars: result.reply.length,
        streamed: stream !== undefined,
        duration_ms: Date.now() - startedAt,
      });
      return 'replied';
    } catch (error) {
      events.emit({
        type: 'agent_turn_failed',
        channel_id: channelId,
        error: errorMessage(error),
        code: error instanceof MagpieError ? error.code : 'unexpected',
        streamed: stream !== undefined,
        duration_ms: Date.now() - startedAt,
      });
      stopTyping();
      // A reply already on screen ends with a note; nothing else is posted after it.
      let ended = false;
      if (finishing) {
        // The answer was complete and is being shown; only recording it failed.
        await finishing.catch(() => {});
        ended = true;
      } else if (stream) {
        ended = await stream.fail(STREAM_BROKEN_NOTE).catch(() => true);
      }
      if (this.abort.signal.aborted) return 'stopped';
      if (!ended) await this.safeSend(target, channelId, APOLOGY_REPLY);
      return 'failed';
    } finally {
      stopTyping();
      if (watch) await this.endWatch(watch, channelId, shownWatch ? stream : undefined);
    }
  }

  /** Holds the messages a request answers live (see `TurnRequest.answers`); returns the release. */
  private holdAnswers(request: TurnRequest): () => void {
    const turns = request.answers ?? (request.turnId === undefined ? [] : [request.turnId]);
    const releases = [...new Set(turns)].map((turnId) => this.options.runtime.awaitAnswer(request.channelId, turnId));
    return () => {
      for (const release of releases) release();
    };
  }

  /**
   * After the turn: what it recorded loses the quotes of what was deleted or edited while it ran,
   * before the channel's next turn can read it. What it posted follows in the background, until
   * no change came since (the channel does not wait for those edits).
   */
  private async endWatch(watch: TurnWatch, channelId: string, stream: ReplyStream | undefined): Promise<void> {
    const failed = (error: unknown): void => {
      this.options.events.emit({ type: 'reply_redaction_failed', channel_id: channelId, step: 'turn', error: errorMessage(error) });
    };
    await watch.settle().catch(failed);
    const refresh = stream?.refresh ? () => stream.refresh!() : undefined;
    const closing = watch.close(refresh).catch(failed);
    this.running.add(closing);
    void closing.then(() => this.running.delete(closing));
  }

  /** True (after telling the channel) when its daily token budget is spent. */
  private async overBudget(request: TurnRequest): Promise<boolean> {
    const { channelId, target } = request;
    const budget = this.options.config.settingsFor(channelId, request.parentId).dailyTokenBudget;
    if (!this.budget.exhausted(budgetKey(request), budget)) return false;
    this.options.events.emit({ type: 'turn_over_budget', channel_id: channelId, budget, spent: this.budget.spentToday(budgetKey(request)) });
    await this.safeSend(target, channelId, 'This channel has used up its model budget for today. I am still listening and will answer again after midnight UTC.');
    return true;
  }

  /** Notices must never turn into unhandled rejections (Discord down, channel gone). */
  private async safeSend(target: ReplyTarget, channelId: string, text: string): Promise<void> {
    try {
      await target.send(text);
    } catch (error) {
      this.options.events.emit({ type: 'reply_failed', channel_id: channelId, error: errorMessage(error) });
    }
  }
}

/** A thread spends its parent channel's budget. */
function budgetKey(request: TurnRequest): string {
  return request.parentId ?? request.channelId;
}

/** One turn for two requests: the newer one's target and turn, both one's source messages. */
function coalesce(older: TurnRequest, newer: TurnRequest): TurnRequest {
  const sources = [...(older.context.sourceMessageIds ?? []), ...(newer.context.sourceMessageIds ?? [])];
  return {
    ...newer,
    context: { ...newer.context, sourceMessageIds: [...new Set(sources)].slice(-MAX_COALESCED_SOURCES) },
  };
}
