/**
 * The model seam. Everything that talks to a model (channel agent, compaction worker,
 * branches) depends on this interface only; the Anthropic SDK lives behind one
 * implementation of it, and tests point that implementation at a fake server on loopback.
 */

export interface TextBlock {
  type: 'text';
  text: string;
}

export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}

export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  is_error?: boolean;
}

export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock;

export interface ModelMessage {
  role: 'user' | 'assistant';
  content: string | ContentBlock[];
}

/** A tool as the model sees it (Anthropic tool definition). */
export interface ToolDefinition {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface ModelRequest {
  system: string;
  messages: ModelMessage[];
  tools?: ToolDefinition[];
  maxTokens: number;
}

export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface ModelResponse {
  content: ContentBlock[];
  /** 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | ... as the server said. */
  stopReason: string;
  usage: ModelUsage;
}

export interface ModelCallOptions {
  signal?: AbortSignal;
  /** Overrides the client's default timeout for this call. */
  timeoutMs?: number;
}

export interface ChatModel {
  /** Model id, for logs. */
  readonly model: string;
  createMessage(request: ModelRequest, options?: ModelCallOptions): Promise<ModelResponse>;
}
