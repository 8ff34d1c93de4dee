/** The model capability: the Anthropic-backed `ChatModel`, its errors, and the tool loop. */
export type {
  ChatModel,
  ContentBlock,
  ModelCallOptions,
  ModelMessage,
  ModelPurpose,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  TextBlock,
  ToolChoice,
  ToolDefinition,
  ToolResultBlock,
  ToolUseBlock,
} from './chat-model.js';
export { definitionsOf, type ToolContext, type ToolHandler, type ToolOutcome } from './tool.js';
export { createAnthropicModel, type AnthropicModelOptions } from './anthropic-model.js';
export { limitConcurrency } from './concurrency-limit.js';
export { ModelError, abortedModelError, type ModelErrorOptions, type ModelFailureReason } from './model-error.js';
export { fitAnswer, type AnswerRoom } from './answer-room.js';
export { overflowNumbers, type OverflowNumbers } from './overflow-numbers.js';
export { runToolLoop, parseToolInput, ANSWER_NOW, DROPPED_RESULT, type ToolLoopBudget, type ToolLoopOptions, type ToolLoopResult } from './tool-loop.js';
export {
  observeModel,
  type ModelCallObserver,
  type ModelCallRecord,
} from './observed-model.js';
