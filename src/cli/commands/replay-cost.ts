import type { ChannelRuntime } from '../../channel/runtime.js';
import type { IncomingMessage } from '../../context/types.js';
import { errorMessage } from '../../common/errors.js';
import type { EventStream } from '../../common/events.js';
import type { LlmSettings } from '../../config/types.js';
import type { ChatModel, ModelPurpose, ToolDefinition } from '../../llm/chat-model.js';
import type { ModelCallObserver, ModelCallRecord } from '../../llm/observed-model.js';
import { wholeInputTokens } from '../../llm/usage.js';

/** Tokens of the model calls of one purpose, summed. */
export interface PurposeCost {
  calls: number;
  failed: number;
  uncached: number;
  cacheWrite: number;
  cacheRead: number;
  billedInput: number;
  output: number;
}

/** Sums every model call a replay makes, by purpose (`channel` = the replies priced, `compaction` = summaries). */
export class CostTally implements ModelCallObserver {
  readonly byPurpose = new Map<ModelPurpose, PurposeCost>();

  modelCalled(call: ModelCallRecord): void {
    const cost = this.byPurpose.get(call.purpose) ?? { calls: 0, failed: 0, uncached: 0, cacheWrite: 0, cacheRead: 0, billedInput: 0, output: 0 };
    cost.calls += 1;
    if (call.outcome === 'error') cost.failed += 1;
    cost.uncached += call.inputTokens;
    cost.cacheWrite += call.cacheWriteTokens;
    cost.cacheRead += call.cacheReadTokens;
    cost.billedInput += call.billedInputTokens;
    cost.output += call.outputTokens;
    this.byPurpose.set(call.purpose, cost);
  }
}

/**
 * Prices the replies of a replay: before a line the bot wrote (`role: "assistant"`) is stored,
 * the model is sent the request the bot would have sent at that moment (the same live context,
 * tools and breakpoints), and what it cost is recorded; the transcript's own reply is what is
 * stored. The channel's calibration learns from the answer as it would in the bot. A failed
 * call is reported and the replay goes on: pricing must never lose a message.
 */
export function replyPricer(options: {
  runtime: ChannelRuntime;
  model: ChatModel;
  tools: readonly ToolDefinition[];
  maxTokensFor: (channelId: string) => number;
  events: EventStream;
}): (message: IncomingMessage) => Promise<void> {
  return async (message) => {
    if (message.role !== 'assistant') return;
    const { runtime, events } = options;
    const channelId = message.channelId;
    await runtime.runSerial(channelId, async () => {
      const request = await runtime.buildModelRequest(channelId, { tools: [...options.tools], maxTokens: options.maxTokensFor(channelId) });
      const estimated = (await runtime.requestEstimate(channelId)).estimatedTokens;
      try {
        const response = await options.model.createMessage(request, { purpose: 'channel' });
        await runtime.recordUsage(channelId, estimated, wholeInputTokens(response.usage));
        await runtime.recordCost(channelId, response.usage);
      } catch (error) {
        events.emit({ type: 'reply_pricing_failed', channel_id: channelId, error: errorMessage(error) });
      }
    });
  };
}

/** The `cost` part of the replay summary: per reply, per 1,000 messages, and the cache's share. */
export function costSummary(tally: CostTally, messages: number, llm: Pick<LlmSettings, 'priceInputPerMtok' | 'priceOutputPerMtok' | 'promptCache'>) {
  const part = (purpose: ModelPurpose) => {
    const cost = tally.byPurpose.get(purpose);
    if (!cost) return undefined;
    const whole = cost.uncached + cost.cacheWrite + cost.cacheRead;
    return {
      calls: cost.calls,
      failed: cost.failed,
      input_tokens: whole,
      uncached_tokens: cost.uncached,
      cache_write_tokens: cost.cacheWrite,
      cache_read_tokens: cost.cacheRead,
      billed_input_tokens: Math.round(cost.billedInput),
      output_tokens: cost.output,
      cache_hit_ratio: whole > 0 ? round(cost.cacheRead / whole) : 0,
      ...priced(cost, llm),
    };
  };
  const replies = part('channel');
  const compaction = part('compaction');
  const perReply = replies && replies.calls > 0 ? Math.round(replies.billed_input_tokens / replies.calls) : undefined;
  const allBilled = (replies?.billed_input_tokens ?? 0) + (compaction?.billed_input_tokens ?? 0);
  return {
    prompt_cache: llm.promptCache,
    ...(perReply === undefined ? {} : { billed_input_per_reply: perReply }),
    billed_input_per_1000_messages: messages > 0 ? Math.round((allBilled * 1000) / messages) : 0,
    ...(replies ? { replies } : {}),
    ...(compaction ? { compaction } : {}),
  };
}

export type CostSummary = ReturnType<typeof costSummary>;

/** Money, when prices are configured; tokens alone otherwise. */
function priced(cost: PurposeCost, llm: Pick<LlmSettings, 'priceInputPerMtok' | 'priceOutputPerMtok'>): { price: number } | Record<string, never> {
  if (llm.priceInputPerMtok <= 0 && llm.priceOutputPerMtok <= 0) return {};
  return { price: round((cost.billedInput * llm.priceInputPerMtok + cost.output * llm.priceOutputPerMtok) / 1_000_000) };
}

/** The cost lines of the human summary. */
export function readableCost(cost: CostSummary): string[] {
  const lines: string[] = [];
  const describe = (label: string, part: NonNullable<CostSummary['replies']>) =>
    `${label}: ${part.calls} calls, ${part.input_tokens} input tokens (${part.cache_read_tokens} read from the cache, ` +
    `${part.cache_write_tokens} written to it), billed as ${part.billed_input_tokens}; ${part.output_tokens} output` +
    ('price' in part ? `; price ${part.price}` : '') +
    (part.failed > 0 ? `; ${part.failed} failed` : '');
  if (cost.replies) lines.push(describe('Replies priced', cost.replies));
  if (cost.compaction) lines.push(describe('Summaries', cost.compaction));
  if (cost.billed_input_per_reply !== undefined) {
    lines.push(
      `Billed-equivalent input: ${cost.billed_input_per_reply} tokens per reply, ${cost.billed_input_per_1000_messages} per 1,000 messages ` +
        `(prompt cache ${cost.prompt_cache}, hit ratio ${cost.replies?.cache_hit_ratio ?? 0}).`,
    );
  } else if (cost.compaction) {
    lines.push(`Billed-equivalent input: ${cost.billed_input_per_1000_messages} tokens per 1,000 messages (prompt cache ${cost.prompt_cache}).`);
  }
  return lines;
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}
