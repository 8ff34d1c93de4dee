import type { BranchSettings } from '../config/types.js';
import type { ChatModel, ModelMessage, ModelRequest, ModelUsage, TextBlock } from '../llm/chat-model.js';
import { ModelError } from '../llm/model-error.js';
import { runToolLoop } from '../llm/tool-loop.js';
import { addUsage } from '../llm/usage.js';
import type { ToolContext, ToolHandler } from '../llm/tool.js';
import type { AnswerRoom } from '../llm/answer-room.js';
import { estimateToolTokens } from '../channel/model-request.js';
import {
  BRANCH_CONTINUE_NOTE,
  BRANCH_SYSTEM_PROMPT,
  NO_CONCLUSION,
  OUT_OF_STEPS_NOTE,
  OUT_OF_TIME_NOTE,
  outOfRoomNote,
} from './branch-prompt.js';
import { compactFork, fixedTokensOf, forkRequest, forkTokens, type Fork } from './fork.js';

export interface RunBranchOptions {
  model: ChatModel;
  question: string;
  /** The channel's live context at the moment of the call. */
  fork: Fork;
  /** memory_search and memory_save. */
  tools: ToolHandler[];
  context: ToolContext;
  settings: BranchSettings;
  /** Tokens the branch's prompt may fill: the channel's window minus the answer's room. */
  windowTokens: number;
  maxTokens: number;
  /** Keeps each call's input and `max_tokens` inside the model's window (a call that cannot is met like an overflow). */
  room?: AnswerRoom;
  signal?: AbortSignal;
  systemPrompt?: string;
  /** Called once the fork is ready, before the first model call. */
  onStart?: (info: { forkEntries: number; estimatedTokens: number; setAsideEntries: number; setAsideSummaries: number }) => void;
}

export type BranchStatus = 'answered' | 'out_of_room' | 'out_of_time' | 'out_of_steps' | 'failed';

export interface BranchOutcome {
  status: BranchStatus;
  /** What goes back to the channel: the conclusion, with a note when it is partial. */
  conclusion: string;
  steps: number;
  usage: ModelUsage;
  overflowRetries: number;
  /** Set when the model failed for a reason other than overflow or time. */
  error?: ModelError | Error;
}

/**
 * Runs one branch: compacts its fork first when it is over `precompact_threshold` of the
 * window, then a bounded tool loop. A context-overflow answer from the server is met by
 * setting more of the fork aside and retrying, keeping the work done so far, at most
 * `max_overflow_retries` times; after that, and on timeout, the branch answers with the best
 * text it has. It never throws for model trouble: the outcome says what happened.
 */
export async function runBranch(options: RunBranchOptions): Promise<BranchOutcome> {
  const { settings, question } = options;
  const systemPrompt = options.systemPrompt ?? BRANCH_SYSTEM_PROMPT;
  const fixed = fixedTokensOf(systemPrompt, question, estimateToolTokens(options.tools.map((tool) => tool.definition)));
  const threshold = settings.precompactThreshold * options.windowTokens;
  let fork = options.fork;
  // Compacting below the threshold, not just to it, leaves the branch room for its own searches.
  if (forkTokens(fork, fixed) > threshold) fork = compactFork(fork, fixed, threshold * 0.75);
  options.onStart?.({
    forkEntries: fork.entries.length,
    estimatedTokens: forkTokens(fork, fixed),
    setAsideEntries: fork.setAsideEntries,
    setAsideSummaries: fork.setAsideSummaries,
  });

  const usage: ModelUsage = { inputTokens: 0, outputTokens: 0 };
  let steps = 0;
  let bestText = '';
  let lastRequest: ModelRequest | undefined;
  const recording: ChatModel = {
    model: options.model.model,
    async createMessage(request, callOptions) {
      lastRequest = request;
      const response = await options.model.createMessage(request, { ...callOptions, purpose: 'branch' });
      steps += 1;
      addUsage(usage, response.usage);
      const text = response.content
        .filter((block): block is TextBlock => block.type === 'text')
        .map((block) => block.text)
        .join('')
        .trim();
      if (text !== '') bestText = text;
      return response;
    },
  };

  const outcome = (status: BranchStatus, conclusion: string, overflowRetries: number, error?: Error): BranchOutcome => ({
    status,
    conclusion,
    steps,
    usage,
    overflowRetries,
    ...(error ? { error } : {}),
  });

  let { system, systemBreaks, messages } = forkRequest(fork, systemPrompt, question);
  let baseLength = messages.length;
  let remainingSteps = Math.max(1, settings.maxSteps);
  for (let retry = 0; ; retry += 1) {
    try {
      const stepsBefore = steps;
      const result = await runToolLoop({
        model: recording,
        system,
        systemBreaks,
        messages,
        tools: options.tools,
        context: options.context,
        maxSteps: remainingSteps,
        maxTokens: options.maxTokens,
        purpose: 'branch',
        ...(options.room ? { room: options.room } : {}),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      remainingSteps -= steps - stepsBefore;
      const text = result.text.trim();
      if (result.stopReason === 'max_steps' || text === '') {
        return outcome('out_of_steps', bestText === '' ? `${NO_CONCLUSION} ${OUT_OF_STEPS_NOTE}` : `${bestText}\n\n${OUT_OF_STEPS_NOTE}`, retry);
      }
      return outcome('answered', text, retry);
    } catch (error) {
      if (options.signal?.aborted) {
        return outcome('out_of_time', bestText === '' ? `${NO_CONCLUSION} ${OUT_OF_TIME_NOTE}` : `${bestText}\n\n${OUT_OF_TIME_NOTE}`, retry);
      }
      if (!(error instanceof ModelError) || !error.contextOverflow) {
        return outcome('failed', bestText, retry, error instanceof Error ? error : new Error(String(error)));
      }
      if (retry >= settings.maxOverflowRetries) {
        const note = outOfRoomNote(retry);
        return outcome('out_of_room', bestText === '' ? `${NO_CONCLUSION} ${note}` : `${bestText}\n\n${note}`, retry);
      }
      // Work done before the overflow (searches and their results) is kept; the fork shrinks.
      const work = lastRequest ? lastRequest.messages.slice(baseLength) : [];
      remainingSteps = Math.max(1, settings.maxSteps - steps);
      fork = compactFork(fork, fixed, threshold * Math.pow(0.5, retry + 1));
      ({ system, systemBreaks, messages } = forkRequest(fork, systemPrompt, question));
      baseLength = messages.length;
      messages = withContinueNote([...messages, ...work]);
    }
  }
}

/** The short prompt of a retry, at the end of the last user message (roles keep alternating). */
function withContinueNote(messages: ModelMessage[]): ModelMessage[] {
  const note: TextBlock = { type: 'text', text: BRANCH_CONTINUE_NOTE };
  // One note is enough, whatever the number of retries.
  messages = messages.map((message) =>
    typeof message.content === 'string'
      ? message
      : { ...message, content: message.content.filter((block) => !(block.type === 'text' && block.text === BRANCH_CONTINUE_NOTE)) },
  );
  const last = messages.at(-1);
  if (!last || last.role !== 'user') return [...messages, { role: 'user', content: [note] }];
  const content = typeof last.content === 'string' ? [{ type: 'text' as const, text: last.content }, note] : [...last.content, note];
  return [...messages.slice(0, -1), { role: 'user', content }];
}
