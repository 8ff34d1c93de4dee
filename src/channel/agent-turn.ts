import { randomUUID } from 'node:crypto';
import type { ChannelSettings } from '../config/types.js';
import type { ChatModel, ModelMessage, ModelRequest, ModelUsage, ToolDefinition } from '../llm/chat-model.js';
import { ModelError, runToolLoop, type ToolLoopResult } from '../llm/index.js';
import { definitionsOf, type ToolContext, type ToolHandler } from '../llm/tool.js';
import { CALIBRATION, overflowNumbers } from '../context/calibration.js';
import { budgetTokens, wholeInputTokens } from '../llm/usage.js';
import { isCapped, shownLength } from './oversized-message.js';
import { estimateMessageTokens, estimateTokens, estimateToolBlockTokens } from '../context/token-estimate.js';
import type { RequestEstimate, TurnEntryInput } from './runtime.js';
import type { HistoryEntry } from '../context/types.js';
import type { BlockSources, SystemSource } from './model-request.js';
import type { TurnWatch } from './turn-watches.js';
import { followChanges, followSummaries } from './turn-requests.js';

/** One entry the agent adds to the turn it answers. */
export type AgentEntry = TurnEntryInput;

/** The part of the channel runtime a turn needs (`ChannelRuntime` satisfies it). */
export interface AgentRuntime {
  /** With `sources`, which entry each block of the request's messages stands for. */
  buildModelRequest(channelId: string, options: { tools: ToolDefinition[]; maxTokens: number; sources?: BlockSources; systemSource?: SystemSource }): Promise<ModelRequest>;
  appendToTurn(channelId: string, entries: AgentEntry[], turnId: number): Promise<HistoryEntry[]>;
  liveContext(channelId: string): Promise<{ entries: HistoryEntry[] }>;
  /** The estimate of the request `buildModelRequest` builds, its calibration and window (keeps tool loops inside it). */
  requestEstimate?(channelId: string): Promise<RequestEstimate>;
  /**
   * The real count expected for a request of this channel estimated at `estimatedTokens`
   * (calibrated), of which `addedToolTokens` are tool calls and results the turn added so far.
   */
  calibratedTokens?(channelId: string, estimatedTokens: number, addedToolTokens?: number): number;
  /** The estimate a request may reach for its real count to be `realTokens`. */
  estimateFor?(channelId: string, realTokens: number, addedToolTokens?: number): number;
  /** A response's real input count for a request of that estimate (calibration). */
  recordUsage?(channelId: string, estimatedTokens: number, inputTokens: number, addedToolTokens?: number): Promise<void>;
  /** What a request cost, as the model counted it (`/context`, status, the report). */
  recordCost?(channelId: string, usage: ModelUsage): Promise<void>;
  /** The model refused a request as too long: calibrate and truncate so that a retry fits. */
  recoverFromOverflow?(channelId: string, overflow: { estimatedTokens: number; tokens?: number; maximum?: number }): Promise<boolean>;
}

/** Who the bot is in history. */
export interface AgentIdentity {
  id: string;
  name: string;
}

export interface AgentTurnOptions {
  runtime: AgentRuntime;
  channelId: string;
  model: ChatModel;
  /** memory_search and memory_save (and any later channel tools). */
  tools: ToolHandler[];
  settings: ChannelSettings;
  context: ToolContext;
  /** The turn being answered; default: the turn of the newest live entry. */
  turnId?: number;
  self?: AgentIdentity;
  /**
   * Sends the reply where people see it and returns the platform id of (the first part of) the
   * posted message, so that history and archive know the reply by the id Discord knows.
   */
  deliver?: (reply: string) => Promise<string | undefined>;
  signal?: AbortSignal;
  /**
   * The deletes and edits reaching the channel while the turn runs: each request of its tool
   * loop carries the messages as they read now (see `followChanges`), not as they read when the
   * turn began.
   */
  watch?: Pick<TurnWatch, 'changes' | 'redact'>;
  /**
   * Shows the answer while it is generated. With it, what people see is everything the model
   * wrote in the turn, the words it wrote before a tool call included (they were on screen
   * already), and `deliver` gets that whole text; history keeps those words as notes and the
   * answer as the reply, each once.
   */
  stream?: AgentStream;
}

/** Where a streamed answer goes while it is being written. */
export interface AgentStream {
  /** The whole text shown so far (not a delta). */
  update(shown: string): void;
  /** The model asked for tools, which run now. */
  toolsRunning?(names: string[]): void;
}

export interface AgentTurnResult {
  reply: string;
  usage: ModelUsage;
  steps: number;
  stopReason: string;
  /** Tokens this turn cost: the server's count when it gave one, else our estimate. */
  spentTokens: number;
}

const DEFAULT_SELF: AgentIdentity = { id: 'magpie', name: 'Magpie' };

/** Said when the model used all its steps on tools and never wrote an answer. */
export const NO_ANSWER_REPLY = 'I looked into it but could not put an answer together. Could you ask again more specifically?';

/** Put before the reply to a message the request could only carry in part. */
export function truncatedNotice(shown: number, total: number): string {
  return `(Your message was too long for me to read whole: I read the first ${shown.toLocaleString('en-US')} of its ${total.toLocaleString('en-US')} characters. The full text is saved and searchable.)`;
}

/**
 * One channel agent turn: exactly the live context the runtime would send (system prompt,
 * summaries, history), a bounded tool loop with the channel's tools, then the tool calls,
 * their results and the reply appended to the turn that triggered it. Model errors propagate;
 * the caller turns them into an apology.
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnResult> {
  const { runtime, channelId, settings, tools } = options;
  const self = options.self ?? DEFAULT_SELF;
  const live = (await runtime.liveContext(channelId)).entries;
  const turnId = options.turnId ?? live.at(-1)?.turnId ?? 0;
  // Built once per tool list: the estimate counts them once per configuration.
  const definitions = definitionsOf(tools);
  let failedEstimate = 0;
  // The tool calls and results the loop has added by the request being built or answered.
  let addedTools = 0;
  // The loop's messages as the model wrote them, by what replaced them when a change came
  // (`watch`): what is shown is the display's to redact (`edit_own_replies`), not the request's.
  const written = new Map<ModelMessage, ModelMessage>();
  const attempt = async (): Promise<{ request: ModelRequest; result: ToolLoopResult }> => {
    const sources: BlockSources = new Map();
    const systemSource: SystemSource = { systemPrompt: '', summaries: [] };
    const request = await runtime.buildModelRequest(channelId, {
      tools: definitions,
      maxTokens: settings.maxResponseTokens,
      ...(options.watch ? { sources, systemSource } : {}),
    });
    const estimate = await runtime.requestEstimate?.(channelId);
    // The calibration as it is now: responses earlier in the loop may have moved it.
    addedTools = 0;
    const calibrated = (estimatedTokens: number, toolTokens = addedTools): number =>
      runtime.calibratedTokens ? runtime.calibratedTokens(channelId, estimatedTokens, toolTokens) : estimatedTokens * (estimate?.factor ?? 1);
    const ceiling = (realTokens: number, toolTokens: number): number =>
      runtime.estimateFor ? runtime.estimateFor(channelId, realTokens, toolTokens) : realTokens / (estimate?.factor ?? 1);
    // What the server counted of the last request beyond its calibrated estimate (before the
    // channel has calibrated, the API's tool-use prompt). Each request of the loop starts with
    // the one before it, so the next one is short of it too: kept off the window's room, since a
    // result cut to fit leaves no slack of its own. Against the calibration as it is now, which
    // may have learnt it since.
    let counted: { estimatedTokens: number; toolTokens: number; realTokens: number } | undefined;
    const undercount = (): number => (counted ? Math.max(0, counted.realTokens - calibrated(counted.estimatedTokens, counted.toolTokens)) : 0);
    const result = await runToolLoop({
      model: options.model,
      system: request.system,
      ...(request.systemBreaks ? { systemBreaks: request.systemBreaks } : {}),
      messages: request.messages,
      tools,
      context: options.context,
      maxSteps: settings.maxAgentSteps,
      maxTokens: settings.maxResponseTokens,
      purpose: 'channel',
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.stream ? streamHooks(options.stream) : {}),
      ...(options.watch
        ? { beforeRequest: remembering(followChanges(options.watch, sources), written), beforeSystem: followSummaries(options.watch, systemSource) }
        : {}),
      ...(estimate
        ? {
            // The Compactor's own line: an estimate is an estimate, the window's edge is not where to aim.
            budget: {
              startTokens: estimate.estimatedTokens,
              maxTokens: (toolTokens) => ceiling(settings.compaction.emergencyThreshold * estimate.usableWindow - undercount(), toolTokens),
              estimate: estimateMessageTokens,
              toolEstimate: estimateToolBlockTokens,
            },
            onRequest: ({ estimatedTokens, toolTokens }) => {
              failedEstimate = estimatedTokens;
              addedTools = toolTokens;
            },
            onResponse: (response, { estimatedTokens, toolTokens }) => {
              counted = { estimatedTokens, toolTokens, realTokens: wholeInputTokens(response.usage) };
              // Learnt before the next request is built (the loop awaits the model in between); a
              // failure only loses one observation, the next response teaches the factor again.
              void runtime.recordUsage?.(channelId, estimatedTokens, wholeInputTokens(response.usage), toolTokens).catch(() => {});
              void runtime.recordCost?.(channelId, response.usage).catch(() => {});
            },
            room: {
              contextWindow: settings.contextWindow,
              minTokens: settings.minResponseTokens,
              // The factor as it is now: responses earlier in the loop may have moved it.
              inputTokens: (_request, estimatedTokens) => Math.ceil((calibrated(estimatedTokens) + undercount()) * (1 + CALIBRATION.margin)),
              onRefusal: (error, estimatedTokens) => {
                if (error.overflow?.tokens !== undefined) void runtime.recordUsage?.(channelId, estimatedTokens, error.overflow.tokens, addedTools).catch(() => {});
              },
            },
          }
        : {}),
    });
    return { request, result };
  };
  let turn: { request: ModelRequest; result: ToolLoopResult };
  try {
    turn = await attempt();
  } catch (error) {
    // Too long for the model: truncate as an emergency would, learn the real count, try once more.
    if (!(error instanceof ModelError) || !error.contextOverflow || !runtime.recoverFromOverflow) throw error;
    if (!(await runtime.recoverFromOverflow(channelId, { estimatedTokens: failedEstimate, ...(error.overflow ?? overflowNumbers(error.message)) }))) throw error;
    turn = await attempt();
  }
  const { request, result } = turn;

  let reply = result.stopReason === 'max_steps' || result.text.trim() === '' ? NO_ANSWER_REPLY : result.text.trim();
  // The message this turn answers went to the model cut short: the asker is told, whatever the model wrote.
  const asked = live.findLast((entry) => entry.turnId === turnId && entry.role === 'user' && entry.kind === 'message');
  if (asked && isCapped(asked)) reply = `${truncatedNotice(shownLength(asked), asked.content.length)}\n\n${reply}`;
  const workEntries = entriesOf(result.newMessages, self);
  const shown = options.stream
    ? shownText([...notesOf(entriesOf(result.newMessages.map((message) => written.get(message) ?? message), self)), reply])
    : reply;
  const replyMessageId = (await options.deliver?.(shown)) ?? `magpie-reply-${randomUUID()}`;
  await runtime.appendToTurn(
    channelId,
    [
      ...workEntries,
      { kind: 'message', role: 'assistant', authorId: self.id, authorName: self.name, content: reply, messageId: replyMessageId },
    ],
    turnId,
  );

  const reported = budgetTokens(result.usage, settings.budgetUnit);
  const estimated = estimateTokens(request.system) + estimateTokens(JSON.stringify(request.messages)) + estimateTokens(reply);
  return { reply, usage: result.usage, steps: result.steps, stopReason: result.stopReason, spentTokens: reported > 0 ? reported : estimated };
}

/** `update`, noting what each message it replaces was first (in `written`). */
function remembering(
  update: (messages: readonly ModelMessage[]) => readonly ModelMessage[] | undefined,
  written: Map<ModelMessage, ModelMessage>,
): (messages: readonly ModelMessage[]) => readonly ModelMessage[] | undefined {
  return (messages) => {
    const updated = update(messages);
    updated?.forEach((message, index) => {
      const before = messages[index]!;
      if (message !== before) written.set(message, written.get(before) ?? before);
    });
    return updated;
  };
}

/** Texts of the steps, as one message: blank ones left out, a blank line between the others. */
function shownText(parts: readonly string[]): string {
  return parts
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .join('\n\n');
}

function notesOf(entries: readonly AgentEntry[]): string[] {
  return entries.filter((entry) => entry.kind === 'message').map((entry) => entry.content);
}

/** Collects the deltas of every step and shows their text so far as one message. */
function streamHooks(stream: AgentStream): { onText: (delta: string, step: number) => void; onToolCalls: (names: string[]) => void } {
  const steps: string[] = [];
  return {
    onText: (delta, step) => {
      steps[step - 1] = (steps[step - 1] ?? '') + delta;
      const shown = shownText(steps.map((text) => text ?? ''));
      if (shown !== '') stream.update(shown);
    },
    onToolCalls: (names) => stream.toolsRunning?.(names),
  };
}

/**
 * The loop's intermediate work as history entries: tool calls and results as their blocks'
 * JSON (how the runtime sends them back), text the model wrote alongside a tool call as the
 * bot's words. The final answer is appended separately, as the reply.
 */
function entriesOf(messages: readonly ModelMessage[], self: AgentIdentity): AgentEntry[] {
  const entries: AgentEntry[] = [];
  const last = messages.at(-1);
  for (const message of messages) {
    // The final assistant message is the reply itself.
    if (message === last && message.role === 'assistant' && isTextOnly(message)) continue;
    const blocks = typeof message.content === 'string' ? [{ type: 'text' as const, text: message.content }] : message.content;
    for (const block of blocks) {
      if (block.type === 'text') {
        if (message.role === 'assistant' && block.text.trim() !== '') {
          entries.push({ kind: 'message', role: 'assistant', authorId: self.id, authorName: self.name, content: block.text, messageId: `magpie-note-${randomUUID()}` });
        }
      } else if (block.type === 'tool_use') {
        entries.push({ kind: 'tool_call', role: 'assistant', authorId: self.id, authorName: self.name, content: JSON.stringify(block), messageId: `magpie-tool-${randomUUID()}` });
      } else {
        entries.push({ kind: 'tool_result', role: 'user', authorId: self.id, authorName: self.name, content: JSON.stringify(block), messageId: `magpie-tool-${randomUUID()}` });
      }
    }
  }
  return entries;
}

function isTextOnly(message: ModelMessage): boolean {
  return typeof message.content === 'string' || message.content.every((block) => block.type === 'text');
}
