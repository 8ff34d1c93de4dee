import { randomUUID } from 'node:crypto';
import type { ChannelSettings } from '../config/types.js';
import type { ChatModel, ModelMessage, ModelRequest, ModelUsage, ToolDefinition } from '../llm/chat-model.js';
import { runToolLoop } from '../llm/index.js';
import type { ToolContext, ToolHandler } from '../llm/tool.js';
import { estimateTokens } from './token-estimate.js';
import type { TurnEntryInput } from './runtime.js';
import type { HistoryEntry } from './types.js';

/** One entry the agent adds to the turn it answers. */
export type AgentEntry = TurnEntryInput;

/** The part of the channel runtime a turn needs (`ChannelRuntime` satisfies it). */
export interface AgentRuntime {
  buildModelRequest(channelId: string, options: { tools: ToolDefinition[]; maxTokens: number }): ModelRequest;
  appendToTurn(channelId: string, entries: AgentEntry[], turnId: number): HistoryEntry[] | Promise<HistoryEntry[]>;
  liveContext(channelId: string): { entries: HistoryEntry[] };
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

/**
 * One channel agent turn: exactly the live context the runtime would send (system prompt,
 * summaries, history), a bounded tool loop with the channel's tools, then the tool calls,
 * their results and the reply appended to the turn that triggered it. Model errors propagate;
 * the caller turns them into an apology.
 */
export async function runAgentTurn(options: AgentTurnOptions): Promise<AgentTurnResult> {
  const { runtime, channelId, settings, tools } = options;
  const self = options.self ?? DEFAULT_SELF;
  const turnId = options.turnId ?? runtime.liveContext(channelId).entries.at(-1)?.turnId ?? 0;
  const request = runtime.buildModelRequest(channelId, {
    tools: tools.map((tool) => tool.definition),
    maxTokens: settings.maxResponseTokens,
  });
  const result = await runToolLoop({
    model: options.model,
    system: request.system,
    messages: request.messages,
    tools,
    context: options.context,
    maxSteps: settings.maxAgentSteps,
    maxTokens: settings.maxResponseTokens,
    purpose: 'channel',
    ...(options.signal ? { signal: options.signal } : {}),
  });

  const reply = result.stopReason === 'max_steps' || result.text.trim() === '' ? NO_ANSWER_REPLY : result.text.trim();
  const workEntries = entriesOf(result.newMessages, self);
  const replyMessageId = (await options.deliver?.(reply)) ?? `magpie-reply-${randomUUID()}`;
  await runtime.appendToTurn(
    channelId,
    [
      ...workEntries,
      { kind: 'message', role: 'assistant', authorId: self.id, authorName: self.name, content: reply, messageId: replyMessageId },
    ],
    turnId,
  );

  const reported = result.usage.inputTokens + result.usage.outputTokens;
  const estimated = estimateTokens(request.system) + estimateTokens(JSON.stringify(request.messages)) + estimateTokens(reply);
  return { reply, usage: result.usage, steps: result.steps, stopReason: result.stopReason, spentTokens: reported > 0 ? reported : estimated };
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
