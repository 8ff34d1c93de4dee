import { InputError } from '../common/errors.js';
import { withoutNul } from '../common/outside-text.js';
import type { ChatModel, ModelMessage, ToolResultBlock } from '../llm/chat-model.js';
import { abortedModelError, ModelError } from '../llm/model-error.js';
import type { ToolContext, ToolHandler } from '../llm/tool.js';
import { runToolLoop, type ToolLoopResult } from '../llm/tool-loop.js';
import { estimatedRoom } from '../context/request-room.js';
import { restateMemory } from './memory-restatement.js';
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js';
import { buildSummaryRequestText, FINAL_SUMMARY_REQUEST, SUMMARY_SYSTEM_PROMPT } from './summary-prompt.js';

export interface LlmSummarizerOptions {
  model: ChatModel;
  /** The worker is offered this tool and no other. */
  memoryTools: { memorySave: ToolHandler };
}

/**
 * The compaction worker: the model reads the range as a transcript, saves memories with
 * `memory_save`, and answers with the summary. It never touches history; it throws a
 * `ModelError` on any failure (including an empty summary) so the caller leaves history as is.
 */
export function createLlmSummarizer(options: LlmSummarizerOptions): Summarizer {
  const { model } = options;
  const memorySave = options.memoryTools.memorySave;
  const memoryToolName = memorySave.definition.name;

  async function summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    const { settings } = request;
    if (request.entries.length === 0 && request.priorSummaries.length === 0) {
      throw new InputError('nothing to summarize: no entries and no earlier summaries', {
        context: { channelId: request.channelId },
      });
    }
    // The caller owns the deadline, but a hung call must never outlive the worker's own
    // timeout either: the compaction lock depends on this promise settling.
    const signal = AbortSignal.any([request.signal, AbortSignal.timeout(settings.workerTimeoutMs)]);
    if (signal.aborted) throw abortedModelError(signal);

    const context: ToolContext = {
      channelId: request.location.channelId,
      ...(request.location.guildId !== undefined ? { guildId: request.location.guildId } : {}),
      ...(request.location.dmUserId !== undefined ? { dmUserId: request.location.dmUserId } : {}),
      // Memories point back at what people and the bot said; tool traffic is not in the transcript.
      sourceMessageIds: request.entries.filter((entry) => entry.kind === 'message').map((entry) => entry.messageId),
      // memory_save takes its sources from this range only, and records those it names.
      sourceCandidates: request.entries
        .filter((entry) => entry.kind === 'message')
        .map((entry) => ({ messageId: entry.messageId, content: entry.content })),
      signal,
    };
    const messages: ModelMessage[] = [
      {
        role: 'user',
        content: buildSummaryRequestText({
          channelId: request.channelId,
          priorSummaries: request.priorSummaries,
          entries: request.entries,
        }),
      },
    ];
    const maxCalls = Math.max(1, Math.floor(settings.maxWorkerTurns));
    const common = {
      model,
      system: SUMMARY_SYSTEM_PROMPT,
      tools: [memorySave],
      context,
      maxTokens: settings.summaryMaxTokens,
      signal,
      purpose: 'compaction' as const,
      ...(request.window
        ? { room: estimatedRoom({ contextWindow: request.window.contextWindow, minTokens: settings.summaryMinTokens, factor: () => request.window!.factor, fixedFactor: 1 }) }
        : {}),
    };
    const produced: ModelMessage[] = [];

    // Keep the last allowed call in reserve for the summary itself, in case the model spends
    // every turn saving memories.
    let result: ToolLoopResult = await guard(signal, () =>
      runToolLoop({ ...common, messages, maxSteps: maxCalls > 1 ? maxCalls - 1 : 1 }),
    );
    produced.push(...result.newMessages);
    if (result.stopReason === 'max_steps' && maxCalls > 1) {
      result = await guard(signal, () =>
        runToolLoop({
          ...common,
          messages: [...messages, ...produced, { role: 'user', content: FINAL_SUMMARY_REQUEST }],
          maxSteps: 1,
          toolChoice: { type: 'none' },
        }),
      );
      produced.push(...result.newMessages);
    }

    const summary = cleanSummary(result.text);
    if (summary === '') {
      throw new ModelError('empty_summary', 'the model returned an empty summary', {
        retryable: true,
        context: { channelId: request.channelId, stopReason: result.stopReason },
      });
    }
    return { summary, memoriesSaved: countSaved(produced, memoryToolName) };
  }

  return { name: 'llm', boundedByWindow: true, summarize, restateMemory: (request) => restateMemory(model, request) };
}

/**
 * Once our signal has fired, whatever the call failed with is reported as that abort, named
 * `timeout` when the worker's deadline fired and `aborted` when the caller gave up.
 */
async function guard<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (signal.aborted) throw abortedModelError(signal);
    throw error;
  }
}

/**
 * Trims, and unwraps a `<summary>` element some models add despite the instructions. U+0000 is
 * replaced as in every text that reaches the store (PostgreSQL cannot hold it).
 */
function cleanSummary(text: string): string {
  const trimmed = withoutNul(text).trim();
  const wrapped = /^<summary>([\s\S]*)<\/summary>$/i.exec(trimmed);
  return (wrapped ? wrapped[1]! : trimmed).trim();
}

/** Successful `memory_save` results: each is a memory saved or updated. */
function countSaved(messages: readonly ModelMessage[], toolName: string): number {
  const saveCallIds = new Set<string>();
  let saved = 0;
  for (const message of messages) {
    if (typeof message.content === 'string') continue;
    for (const block of message.content) {
      if (block.type === 'tool_use' && block.name === toolName) saveCallIds.add(block.id);
      if (block.type === 'tool_result' && isSuccessfulSave(block, saveCallIds)) saved += 1;
    }
  }
  return saved;
}

function isSuccessfulSave(block: ToolResultBlock, saveCallIds: ReadonlySet<string>): boolean {
  return saveCallIds.has(block.tool_use_id) && block.is_error !== true;
}
