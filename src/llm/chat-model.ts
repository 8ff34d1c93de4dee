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

/** Image formats the Messages API accepts. */
export type ImageMediaType = 'image/png' | 'image/jpeg' | 'image/gif' | 'image/webp';

/**
 * An image the model sees. Only users' messages carry them; the bytes travel base64-encoded
 * (a URL source would be fetched by the provider, and chat platforms' file URLs expire).
 */
export interface ImageBlock {
  type: 'image';
  source: { type: 'base64'; media_type: ImageMediaType; data: string };
}

export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | ImageBlock;

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
  /**
   * Where the system prompt's stable parts end (character offsets, increasing): after the
   * prompt itself, after each stacked summary. The prompt cache marks them, so a request whose
   * summaries grew by one still reads the earlier ones from the cache.
   */
  systemBreaks?: readonly number[];
  messages: ModelMessage[];
  tools?: ToolDefinition[];
  maxTokens: number;
  /** Absent = the server's default (`auto` when tools are offered). */
  toolChoice?: ToolChoice;
}

/**
 * Tokens of one call (or a sum of calls), as the server counted them. With the prompt cache the
 * request's input is split three ways: `inputTokens` is only the part read neither from nor into
 * the cache (the API's `input_tokens`); the request's real size is the sum of the three
 * (`wholeInputTokens` in `usage.ts`).
 */
export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
  /** Written to the cache (`cache_creation_input_tokens`); absent = 0. */
  cacheWriteTokens?: number;
  /** Of those written, the ones with the one-hour lifetime (billed 2× instead of 1.25×). */
  cacheWrite1hTokens?: number;
  /** Read from the cache (`cache_read_input_tokens`); absent = 0. */
  cacheReadTokens?: number;
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
  /**
   * Asks for the answer as a stream: called with each piece of text as it is generated. The
   * promise still resolves with the whole response. A model that cannot stream ignores it, and
   * the caller then sees the text only in the response.
   */
  onText?: (delta: string) => void;
}

export interface ChatModel {
  /** Model id, for logs. */
  readonly model: string;
  createMessage(request: ModelRequest, options?: ModelCallOptions): Promise<ModelResponse>;
}
