import type {
  ChatModel,
  ContentBlock,
  ModelMessage,
  ModelPurpose,
  ModelResponse,
  ModelUsage,
  TextBlock,
  ToolChoice,
  ToolResultBlock,
  ToolUseBlock,
} from './chat-model.js';
import { fitAnswer, type AnswerRoom } from './answer-room.js';
import { abortedModelError, ModelError } from './model-error.js';
import { ceilingOf, fitResults, type ToolLoopBudget } from './fit-results.js';
import { addUsage } from './usage.js';
import { definitionsOf, type ToolContext, type ToolHandler, type ToolOutcome } from './tool.js';

export { DROPPED_RESULT, type ToolLoopBudget } from './fit-results.js';

/** Told to the model when it must answer without more tools. */
export const ANSWER_NOW = 'The context window is nearly full: answer now with what you have, without calling tools.';

export interface ToolLoopOptions {
  model: ChatModel;
  system: string;
  /** Where the system prompt's stable parts end (`ModelRequest.systemBreaks`), for the prompt cache. */
  systemBreaks?: readonly number[];
  /** The conversation so far; not modified. */
  messages: ModelMessage[];
  /** Offered to the model; an empty list offers none. */
  tools: ToolHandler[];
  /** Passed to every tool call (scoping, source ids); `signal` is filled from ours when unset. */
  context: ToolContext;
  /** Model calls at most (values below 1 count as 1). */
  maxSteps: number;
  maxTokens: number;
  signal?: AbortSignal;
  /**
   * `auto` and `none` apply to every call. `any` and `tool` apply to the first call only:
   * forcing a tool on every call would never let the model give its final answer.
   */
  toolChoice?: ToolChoice;
  /** Streams each call's text as it is generated (`step` is 1-based); see `ModelCallOptions.onText`. */
  onText?: (delta: string, step: number) => void;
  /** Called before the tools a response asked for run (to show that work is going on). */
  onToolCalls?: (names: string[], step: number) => void;
  /** Tags every model call of the loop (metrics per purpose). */
  purpose?: ModelPurpose;
  /** Tool results count toward this as they are appended; tool use ends before a request would exceed it. */
  budget?: ToolLoopBudget;
  /**
   * Keeps every request's input and its `max_tokens` inside the window together: `max_tokens` is
   * lowered to what is left (never below the room's floor; a request that cannot leave the floor
   * is not sent but fails as a context overflow, which the caller meets by shrinking its input),
   * and a refusal of the "input + max_tokens" form is answered once by a request asking for what
   * the server says is left.
   */
  room?: AnswerRoom;
  /**
   * Receives each message the loop adds as it adds it, so that a caller keeps the work done
   * when a later call fails (a worker that must trim its history and go on).
   */
  progress?: ModelMessage[];
  /**
   * Called before every model call with the estimate of its request (0 without a budget) and the
   * tool calls and results the loop appended so far (see `ToolLoopBudget.toolEstimate`).
   */
  onRequest?: (request: LoopRequestEstimate) => void;
  /** Called after every model response with the estimate of the request it answered (calibration). */
  onResponse?: (response: ModelResponse, request: LoopRequestEstimate) => void;
  /**
   * Called before every model call with the messages about to be sent (the conversation and what
   * the loop added): returns them as they must be sent now, or undefined when none changed. The
   * result has the same messages in the same order, each either the same object or a replacement
   * of the same role whose tool calls and results keep their ids (text may change, blocks other
   * than tool blocks may go). A replacement stands for the rest of the loop, in `newMessages` and
   * `progress` too, and the budget's estimate follows it (see `ToolLoopBudget.estimate`).
   */
  beforeRequest?: (messages: readonly ModelMessage[]) => readonly ModelMessage[] | undefined;
  /**
   * Called before every model call, after `beforeRequest`: the system prompt as it must be sent
   * now (with its cache breaks), or undefined when it has not changed. The budget's estimate follows.
   */
  beforeSystem?: () => { system: string; systemBreaks?: readonly number[] } | undefined;
}

/** A request of the loop, as its budget estimated it. */
interface LoopRequestEstimate {
  estimatedTokens: number;
  /** Of those, the tool calls and results the loop appended (0 without `toolEstimate`). */
  toolTokens: number;
  step: number;
}

export interface ToolLoopResult {
  /** Text blocks of the last model response, concatenated. */
  text: string;
  /** Assistant messages and tool-result messages produced, in order, ready to persist. */
  newMessages: ModelMessage[];
  /** Model calls made. */
  steps: number;
  /** Summed over every call. */
  usage: ModelUsage;
  /** The last response's stop reason, or `max_steps` when the model still wanted tools. */
  stopReason: string;
  /** Tool results dropped to stay inside the budget (their calls got a short note instead). */
  droppedResults?: number;
  /** Tool results cut to their first results or lines to stay inside the budget (see `shorten-result.ts`). */
  shortenedResults?: number;
}

/**
 * Calls the model, runs the tools it asks for, feeds the results back, and repeats until it
 * answers without tools or `maxSteps` calls have been made. A tool that is unknown, gets bad
 * input or throws produces an error result the model can read; the loop itself never fails
 * because of a tool. Model errors and aborts propagate.
 */
export async function runToolLoop(options: ToolLoopOptions): Promise<ToolLoopResult> {
  const { model, tools, signal } = options;
  let system = options.system;
  let systemBreaks = options.systemBreaks;
  const maxSteps = Math.max(1, Math.floor(options.maxSteps));
  const handlers = new Map(tools.map((tool) => [tool.definition.name, tool]));
  const definitions = definitionsOf(tools);
  const context: ToolContext = signal && !options.context.signal ? { ...options.context, signal } : options.context;
  const conversation = [...options.messages];
  const newMessages: ModelMessage[] = [];
  const usage: ModelUsage = { inputTokens: 0, outputTokens: 0 };
  const budget = options.budget;
  let estimatedTokens = budget?.startTokens ?? 0;
  let toolTokens = 0;
  let droppedResults = 0;
  let shortenedResults = 0;
  let answerNow = false;
  const toolPart = (message: ModelMessage): number => budget?.toolEstimate?.(message) ?? 0;
  const ceiling = (): number => (budget === undefined ? Infinity : ceilingOf(budget, toolTokens));
  const appended = (message: ModelMessage): void => {
    if (budget) estimatedTokens += budget.estimate(message);
    toolTokens += toolPart(message);
  };

  // The messages as the caller wants them sent now; the estimate follows what grew or shrank.
  const update = (): void => {
    const updated = options.beforeRequest?.(conversation);
    if (!updated) return;
    if (updated.length !== conversation.length) throw new TypeError(`beforeRequest returned ${updated.length} messages for ${conversation.length}`);
    updated.forEach((message, index) => {
      const before = conversation[index]!;
      if (message === before) return;
      if (message.role !== before.role) throw new TypeError(`beforeRequest changed the role of message ${index}`);
      if (budget) estimatedTokens += budget.estimate(message) - budget.estimate(before);
      conversation[index] = message;
      const added = newMessages.indexOf(before);
      if (added >= 0) {
        newMessages[added] = message;
        // `toolTokens` counts what the loop appended; the caller's messages are in `startTokens`.
        toolTokens += toolPart(message) - toolPart(before);
      }
      const kept = options.progress?.indexOf(before) ?? -1;
      if (kept >= 0) options.progress![kept] = message;
    });
  };
  const updateSystem = (): void => {
    const updated = options.beforeSystem?.();
    if (!updated) return;
    // Counted as a message of its text would be: the overhead cancels out.
    if (budget) estimatedTokens += budget.estimate({ role: 'user', content: updated.system }) - budget.estimate({ role: 'user', content: system });
    system = updated.system;
    systemBreaks = updated.systemBreaks;
  };

  for (let step = 1; ; step += 1) {
    if (signal?.aborted) throw abortedModelError(signal);
    update();
    updateSystem();
    if (budget && step > 1 && estimatedTokens > ceiling()) {
      answerNow = true;
      // Told before the results are fitted, so that the request fits with it.
      const last = conversation[conversation.length - 1];
      if (last && last.role === 'user' && typeof last.content !== 'string') {
        const before = budget.estimate(last);
        const toolsBefore = toolPart(last);
        last.content = [...last.content, { type: 'text', text: ANSWER_NOW }];
        estimatedTokens += budget.estimate(last) - before;
        toolTokens += toolPart(last) - toolsBefore;
      }
      const fitted = fitResults(newMessages, { estimatedTokens, toolTokens }, budget);
      ({ estimatedTokens, toolTokens } = fitted);
      droppedResults += fitted.dropped;
      shortenedResults += fitted.shortened;
    }
    const toolChoice: ToolChoice | undefined = answerNow ? { type: 'none' } : choiceForStep(options.toolChoice, step);
    options.onRequest?.({ estimatedTokens, toolTokens, step });
    const request = {
      system,
      ...(systemBreaks && systemBreaks.length > 0 ? { systemBreaks } : {}),
      messages: conversation,
      maxTokens: options.maxTokens,
      ...(definitions.length > 0 ? { tools: definitions } : {}),
      ...(toolChoice && definitions.length > 0 ? { toolChoice } : {}),
    };
    if (options.room) request.maxTokens = fitAnswer(options.room, request, estimatedTokens);
    const send = () =>
      model.createMessage(request, {
        ...(signal ? { signal } : {}),
        ...(options.purpose ? { purpose: options.purpose } : {}),
        ...(options.onText ? { onText: (delta: string) => options.onText!(delta, step) } : {}),
      });
    let response: ModelResponse;
    try {
      response = await send();
    } catch (error) {
      const left = options.room && error instanceof ModelError ? answerLeft(options.room, error, request.maxTokens) : undefined;
      if (left === undefined) throw error;
      // The server counted the input and said what is left for the answer: ask for that, once.
      options.room!.onRefusal?.(error as ModelError, estimatedTokens);
      request.maxTokens = left;
      response = await send();
    }
    options.onResponse?.(response, { estimatedTokens, toolTokens, step });
    addUsage(usage, response.usage);

    const text = response.content
      .filter((block): block is TextBlock => block.type === 'text')
      .map((block) => block.text)
      .join('');
    const toolUses = response.content.filter((block): block is ToolUseBlock => block.type === 'tool_use');
    const assistantContent = assistantBlocks(response.content);
    if (assistantContent.length > 0) {
      const assistant: ModelMessage = { role: 'assistant', content: assistantContent };
      conversation.push(assistant);
      newMessages.push(assistant);
      options.progress?.push(assistant);
      appended(assistant);
    }
    const done = (stopReason: string): ToolLoopResult => ({
      text,
      newMessages,
      steps: step,
      usage,
      stopReason,
      ...(droppedResults > 0 ? { droppedResults } : {}),
      ...(shortenedResults > 0 ? { shortenedResults } : {}),
    });
    if (toolUses.length === 0) return done(response.stopReason);

    // Output cut off by max_tokens while the model was writing a call leaves that call's input
    // incomplete: running it (a memory saved half-written) would be worse than not. It gets an
    // error result instead, so the history stays valid and the model can call again.
    const lastBlock = response.content[response.content.length - 1];
    const cutOff = response.stopReason === 'max_tokens' && lastBlock?.type === 'tool_use' ? lastBlock : undefined;
    // Tools run one after another, in the order asked: saves and searches may depend on
    // each other, and their results must line up with the calls.
    options.onToolCalls?.(toolUses.map((call) => call.name), step);
    const results: ToolResultBlock[] = [];
    for (const call of toolUses) {
      if (signal?.aborted) throw abortedModelError(signal);
      const outcome = call === cutOff ? CUT_OFF_OUTCOME : await runOneTool(handlers, call, context);
      results.push({
        type: 'tool_result',
        tool_use_id: call.id,
        content: outcome.content,
        ...(outcome.isError ? { is_error: true } : {}),
      });
    }
    const toolResults: ModelMessage = { role: 'user', content: results };
    conversation.push(toolResults);
    newMessages.push(toolResults);
    options.progress?.push(toolResults);
    appended(toolResults);

    // Asked to answer without tools and called one anyway: no further call would end otherwise.
    if (step >= maxSteps || (answerNow && step > 1)) {
      // The calls of the last step did run (their effects, such as saved memories, count),
      // and the history stays valid: every tool call has its result.
      return done('max_steps');
    }
  }
}

/**
 * After a refusal of the "input + max_tokens > window" form: the `max_tokens` that fits beside
 * the input the server counted, when that still leaves the floor; undefined otherwise (the input
 * itself must shrink, which is the caller's to do).
 */
function answerLeft(room: AnswerRoom, error: ModelError, asked: number): number | undefined {
  const numbers = error.overflow;
  if (!error.contextOverflow || numbers?.answerTokens === undefined || numbers.tokens === undefined) return undefined;
  const left = (numbers.maximum ?? room.contextWindow) - numbers.tokens;
  return left >= room.minTokens && left < asked ? left : undefined;
}

const CUT_OFF_OUTCOME: ToolOutcome = {
  isError: true,
  content: 'not run: this call was cut off by the output limit (max_tokens) before its input was complete; call it again, with shorter input if needed',
};

function choiceForStep(choice: ToolChoice | undefined, step: number): ToolChoice | undefined {
  if (!choice) return undefined;
  if (choice.type === 'any' || choice.type === 'tool') return step === 1 ? choice : undefined;
  return choice;
}

/**
 * What goes back to the model as its own turn: text that is not blank, and tool calls whose
 * input is an object (the API refuses anything else in a tool_use block, so odd input is replaced by
 * `{}` here and reported to the model through the tool's error result).
 */
function assistantBlocks(content: readonly ContentBlock[]): ContentBlock[] {
  const blocks: ContentBlock[] = [];
  for (const block of content) {
    if (block.type === 'text') {
      // The API refuses empty and whitespace-only text blocks (some servers emit "\n\n" before a call).
      if (block.text.trim() !== '') blocks.push(block);
    } else if (block.type === 'tool_use') {
      const parsed = parseToolInput(block.input);
      blocks.push({ ...block, input: parsed.ok ? parsed.value : {} });
    }
  }
  return blocks;
}

type ParsedInput = { ok: true; value: Record<string, unknown> } | { ok: false; problem: string };

/** Tool input must be a JSON object; some servers send it as a JSON string, which is accepted. */
export function parseToolInput(input: unknown): ParsedInput {
  let value = input;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return { ok: false, problem: 'tool input is not valid JSON' };
    }
  }
  if (value === undefined || value === null) return { ok: true, value: {} };
  if (typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, problem: `tool input must be a JSON object, got ${Array.isArray(value) ? 'an array' : typeof value}` };
  }
  return { ok: true, value: value as Record<string, unknown> };
}

async function runOneTool(
  handlers: ReadonlyMap<string, ToolHandler>,
  call: ToolUseBlock,
  context: ToolContext,
): Promise<ToolOutcome> {
  const handler = handlers.get(call.name);
  if (!handler) {
    const available = [...handlers.keys()].join(', ') || 'none';
    return { isError: true, content: `unknown tool ${call.name || '(no name)'}; available tools: ${available}` };
  }
  const parsed = parseToolInput(call.input);
  if (!parsed.ok) return { isError: true, content: `${call.name}: ${parsed.problem}` };
  try {
    const outcome = await handler.run(parsed.value, context);
    if (!outcome || typeof outcome.content !== 'string') {
      return { isError: true, content: `${call.name} returned no result` };
    }
    return { content: outcome.content, isError: outcome.isError === true };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { isError: true, content: `${call.name} failed: ${message}` };
  }
}
