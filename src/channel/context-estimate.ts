import type { ChannelSettings } from '../config/types.js';
import type { ToolDefinition } from '../llm/chat-model.js';
import { usableWindow, usageOf } from './calibration.js';
import type { ChannelState } from './channel-state.js';
import { estimateToolTokens, SUMMARY_HEADER_TOKENS } from './model-request.js';
import type { RequestEstimate } from './runtime-types.js';
import { estimateTokens } from './token-estimate.js';
import type { ContextStatus } from './types.js';

/**
 * What a channel's next request is estimated at: its system prompt, the tool definitions
 * offered, the summary header, summaries and live entries. O(1) per check: running totals,
 * plus the prompt recounted only when hot reload changed it.
 */
export class ContextEstimator {
  private countedTools: readonly ToolDefinition[];
  private countedToolTokens: number;

  constructor(tools: readonly ToolDefinition[]) {
    this.countedTools = tools;
    this.countedToolTokens = estimateToolTokens(tools);
  }

  /** Tokens of the tool definitions counted in every estimate (0 when no tool is offered). */
  get toolTokens(): number {
    return this.countedToolTokens;
  }

  /** The tools a request is built with are the ones counted from now on. */
  countTools(tools: readonly ToolDefinition[]): void {
    if (tools === this.countedTools) return;
    this.countedTools = tools;
    this.countedToolTokens = estimateToolTokens(tools);
  }

  estimate(state: ChannelState, settings: ChannelSettings): number {
    if (state.promptText !== settings.systemPrompt) {
      state.promptText = settings.systemPrompt;
      state.promptTokens = estimateTokens(settings.systemPrompt);
    }
    const header = state.summaries.length > 0 ? SUMMARY_HEADER_TOKENS : 0;
    return state.promptTokens + this.countedToolTokens + header + state.summaryTokens + state.entryTokens;
  }

  request(state: ChannelState, settings: ChannelSettings): RequestEstimate {
    return { estimatedTokens: this.estimate(state, settings), factor: state.calibration.factor, usableWindow: usableWindow(settings) };
  }

  /** What `/context` shows. */
  status(state: ChannelState, settings: ChannelSettings): ContextStatus {
    const estimatedTokens = this.estimate(state, settings);
    const factor = state.calibration.factor;
    const status: ContextStatus = {
      channelId: state.channelId,
      estimatedTokens,
      contextWindow: settings.contextWindow,
      usableWindow: usableWindow(settings),
      calibration: { factor, observations: state.calibration.observations },
      calibratedTokens: Math.round(estimatedTokens * factor),
      usage: usageOf(estimatedTokens, factor, settings),
      thresholds: {
        background: settings.compaction.backgroundThreshold,
        aggressive: settings.compaction.aggressiveThreshold,
        emergency: settings.compaction.emergencyThreshold,
      },
      liveMessages: state.entries.length,
      summaries: state.summaries.length,
      archivedMessages: state.archivedCount,
      compactionRunning: state.compaction !== undefined,
    };
    if (state.lastCompaction) status.lastCompaction = { ...state.lastCompaction };
    return status;
  }
}
