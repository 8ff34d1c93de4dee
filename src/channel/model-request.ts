import type { ContentBlock, ModelMessage, ModelRequest, TextBlock, ToolDefinition, ToolResultBlock } from '../llm/chat-model.js';
import { requestContent } from './oversized-message.js';
import { estimateTokens } from '../context/token-estimate.js';
import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { renderSummary, SUMMARY_HEADER } from '../context/summary-text.js';

/** Sent in place of a first message when the live history opens with the assistant. */
const CONTINUATION_TEXT = '(the conversation continues)';
/** Stands in for the result of a tool call that never got one. */
const INTERRUPTED_RESULT = 'no result: the call was interrupted before it finished';

/** Tool definitions count as the JSON the model is sent. */
export function estimateToolTokens(tools: readonly ToolDefinition[]): number {
  return tools.length === 0 ? 0 : estimateTokens(JSON.stringify(tools));
}

export function buildSystemPrompt(systemPrompt: string, summaries: readonly SummaryEntry[]): string {
  if (summaries.length === 0) return systemPrompt;
  return systemPrompt + SUMMARY_HEADER + summaries.map(renderSummary).join('\n\n');
}

/**
 * Where the stable parts of `buildSystemPrompt`'s text end: after the prompt, then after each
 * summary but the last. The prompt cache marks them, so a summary appended after the others
 * leaves the cached prefix before it intact.
 */
export function systemBreaksOf(systemPrompt: string, summaries: readonly SummaryEntry[]): number[] {
  if (summaries.length === 0) return [];
  const breaks = [systemPrompt.length];
  let at = systemPrompt.length + SUMMARY_HEADER.length;
  for (const [index, summary] of summaries.slice(0, -1).entries()) {
    at += (index === 0 ? 0 : 2) + renderSummary(summary).length;
    breaks.push(at);
  }
  return breaks;
}

/** Which history entry a block of a built request stands for (see `buildMessages`). */
export interface BlockSource {
  /** The entry, as the request shows it (reply references resolved). */
  entry: HistoryEntry;
  /** The entry's own text or tool block; false for what travels with it (reply context, files). */
  own: boolean;
}

/** Filled by `buildMessages`: each block of the messages it built, by identity, with its entry. */
export type BlockSources = Map<ContentBlock, BlockSource>;

/** What a built request's system prompt was made of (filled by `buildRequest` when asked). */
export interface SystemSource {
  systemPrompt: string;
  summaries: SummaryEntry[];
}

/**
 * Turns live history into alternating user/assistant messages. Consecutive entries of one role
 * merge into one message; people's messages carry their speaker, tool calls and results go
 * back as the blocks they were (their content is the block's JSON, see `appendToTurn`). With
 * `sources`, records which entry each block stands for (a turn brings them up to date when a
 * message changes while it runs).
 */
export function buildMessages(entries: readonly HistoryEntry[], decorate?: EntryDecorator, sources?: BlockSources): ModelMessage[] {
  const messages: ModelMessage[] = [];
  let role: 'user' | 'assistant' | undefined;
  let blocks: ContentBlock[] = [];
  // Each turn's entries together, turns in order: a reply (and its tool calls) follows the
  // message it answers even when others wrote while it was being made. In arrival order the
  // request for those later messages would end with the earlier reply, which the API reads as
  // the start of its own answer to continue (and its tool calls would be split from their results).
  const ordered = [...entries].sort((left, right) => left.turnId - right.turnId || left.seq - right.seq);
  const flush = () => {
    if (role === undefined || blocks.length === 0) return;
    // The API wants tool results first in the user message that answers the tool calls.
    messages.push({ role, content: role === 'user' ? orderedUserBlocks(blocks) : blocks });
  };
  for (const entry of ordered) {
    if (entry.role !== role) {
      flush();
      role = entry.role;
      blocks = [];
    }
    const block = toBlock(entry);
    const decorated = decorate ? decorate(entry, block) : [block];
    blocks.push(...decorated);
    for (const each of decorated) sources?.set(each, { entry, own: each === block });
  }
  flush();
  pairToolBlocks(messages);
  // The API wants a user message first, and at least one (a truncation may leave none live).
  if (messages.length === 0 || messages[0]!.role === 'assistant') {
    messages.unshift({ role: 'user', content: [{ type: 'text', text: CONTINUATION_TEXT }] });
  }
  return messages;
}

/**
 * The API refuses a tool_use not answered by a tool_result at the start of the very next
 * message, and a tool_result that answers no tool_use of the message before. History can hold
 * either (a turn cut short after its call was stored, a call that left the live context), and
 * one such entry must not make every later request of the channel fail: an unanswered call
 * gets an error result, a result without its call goes as text. Alternation is untouched.
 */
function pairToolBlocks(messages: ModelMessage[]): void {
  for (let index = 0; index < messages.length; index += 1) {
    const message = messages[index]!;
    if (message.role !== 'user' || typeof message.content === 'string') continue;
    const previous = messages[index - 1];
    const asked = new Set(toolUseIds(previous));
    if (!message.content.some((block) => block.type === 'tool_result' && !asked.has(block.tool_use_id))) continue;
    message.content = orderedUserBlocks(
      message.content.map((block) =>
        block.type === 'tool_result' && !asked.has(block.tool_use_id) ? { type: 'text' as const, text: `(tool result) ${block.content}` } : block,
      ),
    );
  }
  for (let index = 0; index < messages.length; index += 1) {
    const ids = messages[index]!.role === 'assistant' ? toolUseIds(messages[index]) : [];
    if (ids.length === 0) continue;
    let next = messages[index + 1];
    if (!next) {
      next = { role: 'user', content: [] };
      messages.push(next);
    }
    const blocks = typeof next.content === 'string' ? [{ type: 'text' as const, text: next.content }] : next.content;
    const answered = new Set(blocks.flatMap((block) => (block.type === 'tool_result' ? [block.tool_use_id] : [])));
    const missing = ids.filter((id) => !answered.has(id));
    if (missing.length === 0) continue;
    const filler: ToolResultBlock[] = missing.map((id) => ({ type: 'tool_result', tool_use_id: id, content: INTERRUPTED_RESULT, is_error: true }));
    next.content = orderedUserBlocks([...filler, ...blocks]);
  }
}

function toolUseIds(message: ModelMessage | undefined): string[] {
  if (!message || message.role !== 'assistant' || typeof message.content === 'string') return [];
  return message.content.flatMap((block) => (block.type === 'tool_use' ? [block.id] : []));
}

/** Tool results first in a user message, as the API wants. */
function orderedUserBlocks(blocks: ContentBlock[]): ContentBlock[] {
  return [...blocks.filter(isToolResult), ...blocks.filter((block) => !isToolResult(block))];
}

/**
 * Adds what travels with an entry besides its text (images, inlined files, the archived message
 * it replies to): returns the blocks that stand for it, its own among them.
 */
export type EntryDecorator = (entry: HistoryEntry, block: ContentBlock) => ContentBlock[];

export function buildRequest(options: {
  systemPrompt: string;
  summaries: readonly SummaryEntry[];
  entries: readonly HistoryEntry[];
  tools: ToolDefinition[];
  maxTokens: number;
  decorate?: EntryDecorator;
  /** See `buildMessages`. */
  sources?: BlockSources;
  /** Filled with the prompt and summaries the system text was built from. */
  systemSource?: SystemSource;
}): ModelRequest {
  if (options.systemSource) {
    options.systemSource.systemPrompt = options.systemPrompt;
    options.systemSource.summaries = [...options.summaries];
  }
  const request: ModelRequest = {
    system: buildSystemPrompt(options.systemPrompt, options.summaries),
    messages: buildMessages(options.entries, options.decorate, options.sources),
    maxTokens: options.maxTokens,
  };
  const systemBreaks = systemBreaksOf(options.systemPrompt, options.summaries);
  if (systemBreaks.length > 0) request.systemBreaks = systemBreaks;
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

/** The text block a message entry is sent as. */
export function textBlock(entry: HistoryEntry): TextBlock {
  // The API refuses blank text blocks.
  const content = entry.content.trim() === '' ? '(empty message)' : requestContent(entry);
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
