import type { HistoryEntry } from '../context/types.js';
import type { ToolContext } from '../llm/tool.js';

/**
 * A channel turn's tool context, extended so that `memory_save` accepts as sources only
 * messages of the channel's live context, the messages the turn answers, and the channel's
 * own messages its searches showed during this turn. Another channel's message ids (seen in a
 * memory shared by a wider scope) are refused: a delete there could not find the memory here.
 */
export function withSourceCheck(context: ToolContext, entries: readonly HistoryEntry[]): ToolContext {
  const live = new Set<string>();
  for (const entry of entries) if (entry.kind === 'message') live.add(entry.messageId);
  for (const id of context.sourceMessageIds ?? []) live.add(id);
  return {
    ...context,
    seenSourceIds: context.seenSourceIds ?? new Set<string>(),
    isKnownSource: (id) => live.has(id),
  };
}
