import type { HistoryEntry } from '../channel/types.js';
import type { ToolContext } from '../llm/tool.js';

/**
 * A channel turn's tool context, extended so that `memory_save` accepts as sources only
 * messages of the channel's live context (their ids, or ids quoted by tool results there) and
 * what this turn's searches showed.
 */
export function withSourceCheck(context: ToolContext, entries: readonly HistoryEntry[]): ToolContext {
  const live = new Set<string>();
  const quoted: string[] = [];
  for (const entry of entries) {
    if (entry.kind === 'message') live.add(entry.messageId);
    else if (entry.kind === 'tool_result') quoted.push(entry.content);
  }
  for (const id of context.sourceMessageIds ?? []) live.add(id);
  return {
    ...context,
    seenSourceIds: context.seenSourceIds ?? new Set<string>(),
    isKnownSource: (id) => live.has(id) || quoted.some((content) => content.includes(JSON.stringify(id).slice(1, -1))),
  };
}
