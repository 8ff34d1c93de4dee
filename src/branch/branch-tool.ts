import { randomUUID } from 'node:crypto';
import { ChannelSlots, type TokenAccount } from '../common/channel-slots.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import type { ChatModel } from '../llm/chat-model.js';
import { budgetTokens, usageFields } from '../llm/usage.js';
import type { ToolContext, ToolHandler, ToolOutcome } from '../llm/tool.js';
import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { estimatedRoom } from '../context/request-room.js';
import { UNCORRECTED, type RequestFactors } from '../context/calibration.js';
import { runBranch } from './run-branch.js';

/** Longest question a branch takes; a longer one is a tool error, not a silent cut. */
export const MAX_QUESTION_LENGTH = 4000;

const BRANCH_DEFINITION = {
  name: 'branch',
  description:
    'Think about one question in a separate branch that sees a copy of this conversation and can search long-term ' +
    'memory (everything said in this channel, even long ago, and saved memories). Use it when answering needs ' +
    'older context you do not see. Returns the branch\'s conclusion as short text.',
  input_schema: {
    type: 'object',
    properties: {
      question: { type: 'string', description: 'The question the branch should answer, self-contained.', maxLength: MAX_QUESTION_LENGTH },
    },
    required: ['question'],
    additionalProperties: false,
  },
};

export interface BranchToolOptions {
  model: ChatModel;
  /** The channel's live context, read at the moment of the call. */
  liveContext: (channelId: string) => Promise<{ summaries: readonly SummaryEntry[]; entries: readonly HistoryEntry[] }>;
  settingsFor: (channelId: string, parentId?: string) => ChannelSettings;
  /** memory_search and memory_save: a branch has no other tool. */
  tools: ToolHandler[];
  budget: TokenAccount;
  events: EventStream;
  /**
   * The channel's calibration (real tokens per estimated token, 1 until the model has answered),
   * for its messages and for tool calls and results: thresholds compare the real count, as the
   * Compactor's do.
   */
  calibration?: (channelId: string) => RequestFactors;
}

/**
 * The channel agent's `branch` tool. Limits (branches per channel, the daily budget) and bad
 * input are answered with a tool error the model can read; a branch that runs out of room or
 * time answers with what it has. Nothing here throws into the channel's turn.
 */
export function createBranchTool(options: BranchToolOptions): ToolHandler {
  const slots = new ChannelSlots();
  return {
    definition: BRANCH_DEFINITION,
    async run(input: unknown, context: ToolContext): Promise<ToolOutcome> {
      const question = checkQuestion(input);
      if (typeof question !== 'string') return question;
      const channelId = context.channelId;
      const settings = options.settingsFor(channelId, context.parentChannelId);
      if (options.budget.exhausted(channelId, settings.dailyTokenBudget)) {
        return { isError: true, content: 'branch not started: this channel has used up its model budget for today' };
      }
      const release = slots.tryAcquire(channelId, settings.branch.maxConcurrent);
      if (!release) {
        return {
          isError: true,
          content: `branch not started: ${settings.branch.maxConcurrent} branch${settings.branch.maxConcurrent === 1 ? ' is' : 'es are'} already running in this channel (the limit); answer with what you have or try again later`,
        };
      }
      const branchId = `b-${randomUUID().slice(0, 8)}`;
      const startedAt = Date.now();
      const timeout = AbortSignal.timeout(settings.branch.timeoutMs);
      const signal = context.signal ? AbortSignal.any([context.signal, timeout]) : timeout;
      try {
        const live = await options.liveContext(channelId);
        const outcome = await runBranch({
          model: options.model,
          question,
          fork: { summaries: live.summaries, entries: live.entries, setAsideEntries: 0, setAsideSummaries: 0 },
          tools: options.tools,
          context: { ...context, signal, agent: 'branch', seenSourceIds: new Set(context.seenSourceIds ?? []), seenSources: new Map<string, string>() },
          settings: settings.branch,
          windowTokens: calibratedWindow(settings, options.calibration?.(channelId).messages),
          maxTokens: settings.maxResponseTokens,
          room: estimatedRoom({
            contextWindow: settings.contextWindow,
            minTokens: settings.branch.minResponseTokens,
            factor: () => (options.calibration?.(channelId) ?? UNCORRECTED).messages,
          toolFactor: () => (options.calibration?.(channelId) ?? UNCORRECTED).tools,
          }),
          signal,
          onStart: (info) =>
            options.events.emit({
              type: 'branch_started',
              channel_id: channelId,
              branch_id: branchId,
              fork_entries: info.forkEntries,
              estimated_tokens: info.estimatedTokens,
              set_aside_entries: info.setAsideEntries,
              set_aside_summaries: info.setAsideSummaries,
              running: slots.inUse(channelId),
            }),
        });
        const spent = budgetTokens(outcome.usage, settings.budgetUnit);
        options.budget.record(context.parentChannelId ?? channelId, spent);
        options.events.emit({
          type: 'branch_completed',
          channel_id: channelId,
          branch_id: branchId,
          status: outcome.status,
          steps: outcome.steps,
          overflow_retries: outcome.overflowRetries,
          ...usageFields(outcome.usage),
          output_tokens: outcome.usage.outputTokens,
          conclusion_chars: outcome.conclusion.length,
          duration_ms: Date.now() - startedAt,
          ...(outcome.error ? { error: errorMessage(outcome.error) } : {}),
        });
        if (outcome.status === 'failed') {
          const partial = outcome.conclusion === '' ? '' : ` What it had so far: ${outcome.conclusion}`;
          return { isError: true, content: `branch failed: ${errorMessage(outcome.error)}.${partial}` };
        }
        return { isError: false, content: outcome.conclusion };
      } finally {
        release();
      }
    },
  };
}

/**
 * The window in estimated tokens: `factor × estimate ≤ share × window` is the same test as
 * `estimate ≤ share × window / factor`, so dividing once keeps the estimates uncorrected.
 */
export function calibratedWindow(settings: Pick<ChannelSettings, 'contextWindow' | 'maxResponseTokens'>, factor = 1): number {
  const usable = Math.max(1, settings.contextWindow - settings.maxResponseTokens);
  return Number.isFinite(factor) && factor > 0 ? usable / factor : usable;
}

function checkQuestion(input: unknown): string | ToolOutcome {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { isError: true, content: 'invalid input: branch takes a JSON object { "question": string }' };
  }
  const unknownFields = Object.keys(input).filter((key) => key !== 'question');
  if (unknownFields.length > 0) {
    return { isError: true, content: `invalid input: unknown field ${unknownFields.join(', ')}; branch takes only question` };
  }
  const question = (input as { question?: unknown }).question;
  if (typeof question !== 'string') return { isError: true, content: 'invalid input: question must be a string' };
  const trimmed = question.trim();
  if (trimmed === '') return { isError: true, content: 'invalid input: question is empty' };
  if (trimmed.length > MAX_QUESTION_LENGTH) {
    return { isError: true, content: `invalid input: question is ${trimmed.length} characters; at most ${MAX_QUESTION_LENGTH}` };
  }
  return trimmed;
}
