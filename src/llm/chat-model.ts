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

/**
 * How the model may use the offered tools: `auto` (default) lets it choose, `any` makes it call
 * some tool, `tool` makes it call the named one, `none` forbids tools for this call.
 */
export type ToolChoice =
  | { type: 'auto' }
  | { type: 'any' }
  | { type: 'tool'; name: string }
  | { type: 'none' };

export interface ModelRequest {
  system: string;
  messages: ModelMessage[];
  tools?: ToolDefinition[];
  maxTokens: number;
  /** Absent = the server's default (`auto` when tools are offered). */
  toolChoice?: ToolChoice;
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

/** What a model call is for, so that metrics and logs can tell the callers apart. */
export type ModelPurpose = 'channel' | 'compaction' | 'branch' | 'worker';

export interface ModelCallOptions {
  signal?: AbortSignal;
  /** Who is calling; absent on calls made before tagging existed (counts as `channel`). */
  purpose?: ModelPurpose;
  /** Overrides the client's default timeout for this call. */
  timeoutMs?: number;
}

export interface ChatModel {
  /** Model id, for logs. */
  readonly model: string;
  createMessage(request: ModelRequest, options?: ModelCallOptions): Promise<ModelResponse>;
}
