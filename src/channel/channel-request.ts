import type { ChannelSettings } from '../config/types.js';
import type { ModelRequest, ToolDefinition } from '../llm/chat-model.js';
import { resolveReplyReferences } from '../privacy/reply-reference.js';
import type { ChannelState } from '../context/channel-state.js';
import type { EntryExtras } from './entry-extras.js';
import type { HistoryStore } from './history-store.js';
import { buildRequest, type BlockSources, type SystemSource } from './model-request.js';
import type { HistoryEntry } from '../context/types.js';

/**
 * Exactly what the model is sent for a channel now: its prompt and summaries, its live entries
 * with what each replies to looked up (never copied, so a deleted message is not quoted), and
 * the images and files kept with them.
 */
export async function channelRequest(input: {
  state: ChannelState;
  settings: ChannelSettings;
  store: HistoryStore;
  extras: EntryExtras;
  tools: ToolDefinition[];
  maxTokens: number;
  /** Filled with the entry each block stands for (see `buildMessages`). */
  sources?: BlockSources;
  /** Filled with what the system prompt was built from (see `buildRequest`). */
  systemSource?: SystemSource;
}): Promise<ModelRequest> {
  const { state, settings } = input;
  const channelId = state.channelId;
  // The reads first, then the request from one consistent view of the state.
  const entries = [...state.entries];
  const summaries = [...state.summaries];
  const [decorate, answered] = await Promise.all([
    input.extras.decorator(channelId, entries[0]?.seq ?? state.nextSeq, { images: settings.vision }),
    answeredMessages(input.store, channelId, entries),
  ]);
  return buildRequest({
    systemPrompt: settings.systemPrompt,
    summaries,
    entries: resolveReplyReferences(entries, (messageId) => answered.get(messageId)),
    tools: input.tools,
    maxTokens: input.maxTokens,
    ...(decorate ? { decorate } : {}),
    ...(input.sources ? { sources: input.sources } : {}),
    ...(input.systemSource ? { systemSource: input.systemSource } : {}),
  });
}

/** The messages the entries' reply references name, as history holds them now, by id. */
async function answeredMessages(store: HistoryStore, channelId: string, entries: readonly HistoryEntry[]): Promise<Map<string, HistoryEntry>> {
  const named: string[] = [];
  // A first pass with nothing found only collects the ids the references name.
  resolveReplyReferences(entries, (messageId) => {
    named.push(messageId);
    return undefined;
  });
  const answered = new Map<string, HistoryEntry>();
  for (const messageId of new Set(named)) {
    const entry = await store.findByMessageId(channelId, messageId);
    if (entry) answered.set(messageId, entry);
  }
  return answered;
}
