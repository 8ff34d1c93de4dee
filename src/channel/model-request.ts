import type { ContentBlock, ModelMessage, ModelRequest, TextBlock, ToolDefinition } from '../llm/chat-model.js';
import { estimateTokens } from './token-estimate.js';
import type { HistoryEntry, SummaryEntry } from './types.js';

/** Introduces the stacked summaries in the system prompt. */
export const SUMMARY_HEADER =
  '\n\nEarlier parts of this conversation, oldest first (the full text can be recalled with memory_search):\n';
export const SUMMARY_HEADER_TOKENS = estimateTokens(SUMMARY_HEADER);

/** Sent in place of a first message when the live history opens with the assistant. */
const CONTINUATION_TEXT = '(the conversation continues)';

export function renderSummary(summary: Pick<SummaryEntry, 'kind' | 'fromSeq' | 'toSeq' | 'content'>): string {
  return `[${summary.kind} of messages ${summary.fromSeq}-${summary.toSeq}]\n${summary.content}`;
}

/** Counted once per summary, like entries: its rendering plus the blank line between. */
export function estimateSummaryTokens(summary: Pick<SummaryEntry, 'kind' | 'fromSeq' | 'toSeq' | 'content'>): number {
  return estimateTokens(renderSummary(summary)) + 1;
}

/** Tool definitions count as the JSON the model is sent. */
export function estimateToolTokens(tools: readonly ToolDefinition[]): number {
  return tools.length === 0 ? 0 : estimateTokens(JSON.stringify(tools));
}

export function buildSystemPrompt(systemPrompt: string, summaries: readonly SummaryEntry[]): string {
  if (summaries.length === 0) return systemPrompt;
  return systemPrompt + SUMMARY_HEADER + summaries.map(renderSummary).join('\n\n');
}

/**
 * Turns live history into alternating user/assistant messages. Consecutive entries of one role
 * merge into one message; people's messages carry their speaker, tool calls and results go
 * back as the blocks they were (their content is the block's JSON, see `appendToTurn`).
 */
export function buildMessages(entries: readonly HistoryEntry[]): ModelMessage[] {
  const messages: ModelMessage[] = [];
  let role: 'user' | 'assistant' | undefined;
  let blocks: ContentBlock[] = [];
  const flush = () => {
    if (role === undefined || blocks.length === 0) return;
    // The API wants tool results first in the user message that answers the tool calls.
    const ordered = role === 'user' ? [...blocks.filter(isToolResult), ...blocks.filter((b) => !isToolResult(b))] : blocks;
    messages.push({ role, content: ordered });
  };
  for (const entry of entries) {
    if (entry.role !== role) {
      flush();
      role = entry.role;
      blocks = [];
    }
    blocks.push(toBlock(entry));
  }
  flush();
  if (messages.length > 0 && messages[0]!.role === 'assistant') {
    messages.unshift({ role: 'user', content: [{ type: 'text', text: CONTINUATION_TEXT }] });
  }
  return messages;
}

export function buildRequest(options: {
  systemPrompt: string;
  summaries: readonly SummaryEntry[];
  entries: readonly HistoryEntry[];
  tools: ToolDefinition[];
  maxTokens: number;
}): ModelRequest {
  const request: ModelRequest = {
    system: buildSystemPrompt(options.systemPrompt, options.summaries),
    messages: buildMessages(options.entries),
    maxTokens: options.maxTokens,
  };
  if (options.tools.length > 0) request.tools = options.tools;
  return request;
}

function isToolResult(block: ContentBlock): boolean {
  return block.type === 'tool_result';
}

function toBlock(entry: HistoryEntry): ContentBlock {
  if (entry.kind === 'tool_call') {
    const block = parseBlock(entry.content);
    if (block?.type === 'tool_use') return block;
  } else if (entry.kind === 'tool_result') {
    const block = parseBlock(entry.content);
    if (block?.type === 'tool_result') return block;
  }
  return textBlock(entry);
}

function textBlock(entry: HistoryEntry): TextBlock {
  const content = entry.content === '' ? '(empty message)' : entry.content;
  // The bot's own words go back unlabelled; people are named so the model knows who spoke.
  const text = entry.role === 'assistant' && entry.kind === 'message' ? content : `${entry.authorName}: ${content}`;
  return { type: 'text', text };
}

function parseBlock(json: string): ContentBlock | undefined {
  try {
    const value = JSON.parse(json) as ContentBlock;
    return typeof value === 'object' && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}
