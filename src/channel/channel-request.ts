import type { ChannelSettings } from '../config/types.js';
import type { ModelRequest, ToolDefinition } from '../llm/chat-model.js';
import { resolveReplyReferences } from '../privacy/reply-reference.js';
import type { ChannelState } from './channel-state.js';
import type { EntryExtras } from './entry-extras.js';
import type { HistoryStore } from './history-store.js';
import { buildRequest } from './model-request.js';

/**
 * Exactly what the model is sent for a channel now: its prompt and summaries, its live entries
 * with what each replies to looked up (never copied, so a deleted message is not quoted), and
 * the images and files kept with them.
 */
export function channelRequest(input: {
  state: ChannelState;
  settings: ChannelSettings;
  store: HistoryStore;
  extras: EntryExtras;
  tools: ToolDefinition[];
  maxTokens: number;
}): ModelRequest {
  const { state, settings } = input;
  const channelId = state.channelId;
  const decorate = input.extras.decorator(channelId, state.entries[0]?.seq ?? state.nextSeq, { images: settings.vision });
  return buildRequest({
    systemPrompt: settings.systemPrompt,
    summaries: state.summaries,
    entries: resolveReplyReferences(state.entries, (messageId) => input.store.findByMessageId(channelId, messageId)),
    tools: input.tools,
    maxTokens: input.maxTokens,
    ...(decorate ? { decorate } : {}),
  });
}
