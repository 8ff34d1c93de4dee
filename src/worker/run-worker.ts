import type { WorkerSettings } from '../config/types.js';
import type { ChatModel, ModelMessage, ModelUsage } from '../llm/chat-model.js';
import { runToolLoop, type ToolLoopResult } from '../llm/tool-loop.js';
import type { AnswerRoom } from '../llm/answer-room.js';
import { ModelError } from '../llm/model-error.js';
import type { ToolContext, ToolHandler } from '../llm/tool.js';
import { estimateTokens } from '../context/token-estimate.js';
import { estimateToolTokens } from '../channel/model-request.js';
import { estimateConversation, trimWorkerHistory } from './trim-history.js';
import { taskStatement, WORKER_SYSTEM_PROMPT } from './worker-prompt.js';
import { addUsage } from '../llm/usage.js';

/** Newest model turns a trim always keeps, besides the task statement. */
const KEEP_RECENT_TURNS = 4;

export interface RunWorkerOptions {
  model: ChatModel;
  task: string;
  tools: ToolHandler[];
  context: ToolContext;
  settings: WorkerSettings;
  /** Tokens the worker's prompt may fill: the channel's window minus the answer's room. */
  windowTokens: number;
  maxTokens: number;
  /** Keeps each call's input and `max_tokens` inside the model's window. */
  room?: AnswerRoom;
  signal: AbortSignal;
  /** Checked before each segment; false stops the worker (the channel's budget is spent). */
  mayContinue?: () => boolean;
  onSegment?: (info: { segment: number; turns: number; usage: ModelUsage; estimatedTokens: number }) => void;
  onCompacted?: (info: { segment: number; beforeTokens: number; afterTokens: number; droppedCalls: number; droppedTurns: number }) => void;
}

export type WorkerEnd = 'completed' | 'max_segments' | 'over_budget';

export interface WorkerResult {
  end: WorkerEnd;
  /** The final report, or the last thing the worker wrote. */
  text: string;
  segments: number;
  turns: number;
  usage: ModelUsage;
}

/**
 * A worker's work: the task statement as the first user message, then segments of
 * `turns_per_segment` model turns. Between segments, a conversation over `compact_threshold`
 * of the window loses its oldest tool calls and results (see `trimWorkerHistory`). Ends when
 * the model answers without tools, or after `max_segments`. Model errors and aborts propagate.
 */
export async function runWorker(options: RunWorkerOptions): Promise<WorkerResult> {
  const { settings } = options;
  const fixed = estimateTokens(WORKER_SYSTEM_PROMPT) + estimateToolTokens(options.tools.map((tool) => tool.definition));
  let messages: ModelMessage[] = [{ role: 'user', content: [{ type: 'text', text: taskStatement(options.task) }] }];
  const usage: ModelUsage = { inputTokens: 0, outputTokens: 0 };
  let turns = 0;
  let lastText = '';
  let droppedCalls = 0;
  const threshold = settings.compactThreshold * options.windowTokens;
  for (let segment = 1; segment <= settings.maxSegments; segment += 1) {
    if (options.mayContinue && !options.mayContinue()) {
      return { end: 'over_budget', text: lastText, segments: segment - 1, turns, usage };
    }
    if (segment > 1) {
      const beforeTokens = estimateConversation(messages, fixed);
      if (beforeTokens > threshold) {
        // Well below the threshold, so that the next segment has room to work before the next check.
        const trimmed = trimWorkerHistory(messages, { targetTokens: threshold * 0.5, fixedTokens: fixed, keepTurns: KEEP_RECENT_TURNS, totalDroppedCalls: droppedCalls });
        messages = trimmed.messages;
        droppedCalls += trimmed.droppedCalls;
        options.onCompacted?.({
          segment,
          beforeTokens,
          afterTokens: estimateConversation(messages, fixed),
          droppedCalls: trimmed.droppedCalls,
          droppedTurns: trimmed.droppedTurns,
        });
      }
    }
    let result: ToolLoopResult | undefined;
    let stepsLeft = settings.turnsPerSegment;
    while (!result) {
      const progress: ModelMessage[] = [];
      try {
        result = await runToolLoop({
          model: options.model,
          system: WORKER_SYSTEM_PROMPT,
          messages,
          tools: options.tools,
          context: options.context,
          maxSteps: stepsLeft,
          maxTokens: options.maxTokens,
          signal: options.signal,
          purpose: 'worker',
          progress,
          ...(options.room ? { room: options.room } : {}),
        });
      } catch (error) {
        // The conversation outgrew the window within the segment: keep the work done, drop the
        // oldest turns now (as between segments), and go on with the segment's remaining turns.
        if (!(error instanceof ModelError) || !error.contextOverflow) throw error;
        const done = progress.filter((message) => message.role === 'assistant').length;
        messages = [...messages, ...progress];
        const beforeTokens = estimateConversation(messages, fixed);
        const trimmed = trimWorkerHistory(messages, { targetTokens: threshold * 0.5, fixedTokens: fixed, keepTurns: 1, totalDroppedCalls: droppedCalls });
        if (trimmed.droppedTurns === 0) throw error;
        messages = trimmed.messages;
        droppedCalls += trimmed.droppedCalls;
        turns += done;
        stepsLeft = Math.max(1, stepsLeft - done);
        options.onCompacted?.({ segment, beforeTokens, afterTokens: estimateConversation(messages, fixed), droppedCalls: trimmed.droppedCalls, droppedTurns: trimmed.droppedTurns });
      }
    }
    messages = [...messages, ...result.newMessages];
    turns += result.steps;
    addUsage(usage, result.usage);
    if (result.text.trim() !== '') lastText = result.text.trim();
    options.onSegment?.({ segment, turns, usage: { ...usage }, estimatedTokens: estimateConversation(messages, fixed) });
    if (result.stopReason !== 'max_steps') {
      return { end: 'completed', text: result.text.trim(), segments: segment, turns, usage };
    }
  }
  return { end: 'max_segments', text: lastText, segments: settings.maxSegments, turns, usage };
}
