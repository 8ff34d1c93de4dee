import type { ChannelSettings } from '../config/types.js';
import type { ToolDefinition } from '../llm/chat-model.js';
import { toolFactorOf, usableWindow, usageOf } from '../context/calibration.js';
import type { ChannelState } from '../context/channel-state.js';
import { estimateToolTokens } from './model-request.js';
import { SUMMARY_HEADER_TOKENS } from '../context/summary-text.js';
import type { RequestEstimate } from './runtime-types.js';
import { estimateFixedTokens, estimateTokens } from '../context/token-estimate.js';
import { TOOL_USE_SYSTEM_TOKENS } from '../context/request-room.js';
import type { ContextStatus } from '../context/types.js';

/**
 * What a channel's next request is estimated at: its system prompt, the tool definitions
 * offered, the summary header, summaries and live entries. O(1) per check: running totals,
 * plus the prompt recounted only when hot reload changed it.
 */
export class ContextEstimator {
  private countedTools: readonly ToolDefinition[];
  private countedToolTokens: number;
  /** The real-count side of the fixed part, worked out when a prompt or the tools change. */
  private realTools: number | undefined;

  constructor(tools: readonly ToolDefinition[]) {
    this.countedTools = tools;
    this.countedToolTokens = estimateToolTokens(tools);
  }

  /**
   * The request's fixed part (system prompt and tool definitions), as the estimate counts it and
   * as the server will: the messages' own factor is learnt from what is left.
   */
  fixedPart(state: ChannelState, settings: ChannelSettings): { estimated: number; real: number } {
    this.estimate(state, settings);
    return { estimated: state.promptTokens + this.countedToolTokens, real: this.fixedReal(state) };
  }

  /** The fixed part in real tokens (the prompt's is counted with the channel's, when it changes). */
  private fixedReal(state: ChannelState): number {
    this.realTools ??= this.countedTools.length === 0 ? 0 : estimateFixedTokens(JSON.stringify(this.countedTools)) + TOOL_USE_SYSTEM_TOKENS;
    return state.promptFixedTokens + this.realTools;
  }

  /**
   * The real count expected for a request of this channel estimated at `estimatedTokens`: once
   * the messages' own factor is known, the fixed part as the server counts it, plus the messages
   * corrected by their factor and their tool calls and results by theirs, so that the figure does
   * not drift as compactions or a turn's tool traffic change the share of each; before, the
   * whole-request factor. `addedToolTokens` is the tool traffic a running turn added beyond the
   * live entries. O(1), allocation-free (the check runs it).
   */
  calibrated(state: ChannelState, settings: ChannelSettings, estimatedTokens: number, addedToolTokens = 0): number {
    const messageFactor = state.calibration.messageFactor;
    if (messageFactor === undefined) return estimatedTokens * state.calibration.factor;
    const fixedEstimate = state.promptTokens + this.countedToolTokens;
    const messages = Math.max(0, estimatedTokens - fixedEstimate);
    const tools = Math.min(messages, Math.max(0, state.toolTokens + addedToolTokens));
    return this.fixedReal(state) + messageFactor * (messages - tools) + toolFactorOf(state.calibration) * tools;
  }

  /** The estimate at which `calibrated` reaches `realTokens` (a ceiling in estimated tokens). */
  estimateFor(state: ChannelState, settings: ChannelSettings, realTokens: number, addedToolTokens = 0): number {
    const messageFactor = state.calibration.messageFactor;
    if (messageFactor === undefined) return realTokens / state.calibration.factor;
    const fixedEstimate = state.promptTokens + this.countedToolTokens;
    const toolFactor = toolFactorOf(state.calibration);
    const tools = Math.max(0, state.toolTokens + addedToolTokens);
    const left = Math.max(0, realTokens - this.fixedReal(state));
    // Below the tools' own real count, the ceiling falls inside them.
    const messages = left >= toolFactor * tools ? tools + (left - toolFactor * tools) / messageFactor : left / toolFactor;
    return fixedEstimate + messages;
  }

  /** `calibrated` as a factor on the estimate (what ceilings in estimated tokens divide by). */
  factorAt(state: ChannelState, settings: ChannelSettings, estimatedTokens: number): number {
    if (state.calibration.messageFactor === undefined || !(estimatedTokens > 0)) return state.calibration.factor;
    return this.calibrated(state, settings, estimatedTokens) / estimatedTokens;
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
    this.realTools = undefined;
  }

  estimate(state: ChannelState, settings: ChannelSettings): number {
    if (state.promptText !== settings.systemPrompt) {
      state.promptText = settings.systemPrompt;
      state.promptTokens = estimateTokens(settings.systemPrompt);
      state.promptFixedTokens = estimateFixedTokens(settings.systemPrompt);
    }
    const header = state.summaries.length > 0 ? SUMMARY_HEADER_TOKENS : 0;
    return state.promptTokens + this.countedToolTokens + header + state.summaryTokens + state.entryTokens;
  }

  request(state: ChannelState, settings: ChannelSettings): RequestEstimate {
    const estimatedTokens = this.estimate(state, settings);
    return { estimatedTokens, factor: this.factorAt(state, settings, estimatedTokens), usableWindow: usableWindow(settings) };
  }

  /** What `/context` shows. */
  status(state: ChannelState, settings: ChannelSettings): ContextStatus {
    const estimatedTokens = this.estimate(state, settings);
    const factor = this.factorAt(state, settings, estimatedTokens);
    const status: ContextStatus = {
      channelId: state.channelId,
      estimatedTokens,
      contextWindow: settings.contextWindow,
      usableWindow: usableWindow(settings),
      calibration: calibrationShown(state),
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

/** The factors `/context` shows: the whole request's, and its parts' once learnt. */
function calibrationShown(state: ChannelState): ContextStatus['calibration'] {
  const { factor, observations, messageFactor, toolFactor } = state.calibration;
  return {
    factor,
    observations,
    ...(messageFactor !== undefined ? { messageFactor } : {}),
    ...(toolFactor !== undefined ? { toolFactor } : {}),
  };
}
