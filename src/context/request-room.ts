import type { AnswerRoom } from '../llm/answer-room.js';
import type { ToolDefinition } from '../llm/chat-model.js';
import { CALIBRATION } from './calibration.js';
import { estimateMessageTokens, estimateTokens, estimateToolBlockTokens } from './token-estimate.js';

/**
 * What the Messages API puts in front of a request that offers tools (its tool-use system
 * prompt, 346 tokens on current models with `auto` or `none`), besides the definitions' text.
 */
export const TOOL_USE_SYSTEM_TOKENS = 346;

/**
 * The window of a caller that keeps no running estimate (a branch, a worker, the summarizer):
 * each request is estimated whole before it is sent. The messages carry the channel's kind of
 * text and are corrected by its factor, their tool calls and results by `toolFactor` when given
 * (both read at each request, so a calibration learnt meanwhile applies at once); the system
 * prompt and tool definitions are corrected by `fixedFactor` when they are the caller's own words
 * (the summarizer's English instructions), by the channel's factor otherwise.
 */
export function estimatedRoom(options: {
  contextWindow: number;
  minTokens: number;
  factor: () => number;
  toolFactor?: () => number;
  fixedFactor?: number;
}): AnswerRoom {
  return {
    contextWindow: options.contextWindow,
    minTokens: options.minTokens,
    inputTokens: (request) => {
      const factor = options.factor();
      let messages = 0;
      let tools = 0;
      for (const message of request.messages) {
        messages += estimateMessageTokens(message);
        if (options.toolFactor) tools += estimateToolBlockTokens(message);
      }
      const corrected = (messages - tools) * factor + (tools > 0 ? tools * options.toolFactor!() : 0);
      return Math.ceil(corrected * (1 + CALIBRATION.margin)) + fixedTokens(request, options.fixedFactor ?? factor);
    },
  };
}

/** System prompt and tools in real tokens, with the calibration margin. */
function fixedTokens(request: { system: string; tools?: readonly ToolDefinition[] }, factor: number): number {
  const tools = request.tools && request.tools.length > 0 ? estimateTokens(JSON.stringify(request.tools)) : 0;
  const toolSystem = tools > 0 ? TOOL_USE_SYSTEM_TOKENS : 0;
  return Math.ceil((estimateTokens(request.system) + tools) * factor * (1 + CALIBRATION.margin)) + toolSystem;
}
