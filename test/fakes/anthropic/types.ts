/**
 * The fake Anthropic's public vocabulary: the requests it records, the replies a test scripts
 * (text, tool calls, errors, delays, raw bodies, hang-ups, functions), the handle a test holds
 * and the options for token counting and the prompt cache.
 */
import type { FakePromptCache } from '../fake-prompt-cache.js';

/** One HTTP request the fake received, body parsed as JSON (undefined when it was not JSON). */
export interface RecordedRequest {
  method: string;
  /** Path with query, e.g. `/v1/messages`. */
  path: string;
  /** Lower-cased header names, as Node gives them; repeated headers joined with ", ". */
  headers: Record<string, string>;
  /** The Messages API body (`model`, `system`, `messages`, `tools`, `max_tokens`, ...). */
  body: any;
  /** 1-based arrival order. */
  index: number;
  /** The prompt's token count, when the fake counts tokens (`countTokens`). */
  inputTokens?: number;
  /** Set when the request was refused as not fitting the window, in which of the two forms. */
  refusal?: RefusalForm;
}

/**
 * How a reply is streamed when the request asks for `stream: true` (server-sent events as the
 * Messages API sends them: message_start, content_block_start/delta/stop, message_delta,
 * message_stop). Ignored for plain requests.
 */
export interface FakeStreaming {
  /** The text deltas, in order; they must join to `text`. Default: pieces of 40 characters. */
  chunks?: string[];
  /** Waits this long before each text delta (default 0). */
  chunkDelayMs?: number;
  /** Hangs up (destroys the connection) after this many text deltas: a stream broken midway. */
  breakAfter?: number;
  /** Sends an `error` event (overloaded) after this many text deltas, then ends the stream. */
  errorAfter?: number;
}

/** A plain text answer (`stop_reason` defaults to `end_turn`). */
export interface FakeTextReply extends FakeStreaming {
  text: string;
  stopReason?: string;
  usage?: { inputTokens?: number; outputTokens?: number };
}

/** The model asks for tools (`stop_reason: tool_use`); `text` comes before the tool blocks. */
export interface FakeToolUseReply extends FakeStreaming {
  toolUse: Array<{ name: string; input: unknown; id?: string }>;
  text?: string;
  usage?: { inputTokens?: number; outputTokens?: number };
}

/**
 * An HTTP error. Without a body, an Anthropic-shaped error JSON is sent whose type follows the
 * status (`rate_limit_error` for 429, `api_error` for 5xx, ...). `message` sets its text.
 * Statuses the SDK retries (408, 409, 429, 5xx) get `retry-after-ms: 5` unless `headers` say
 * otherwise, so that retries in tests wait milliseconds rather than the SDK's 0.5 s backoff.
 */
export interface FakeErrorReply {
  status: number;
  body?: unknown;
  message?: string;
  headers?: Record<string, string>;
}

/** Waits before answering with `then`. If the client gives up meanwhile, nothing is sent. */
export interface FakeDelayReply {
  delayMs: number;
  then: FakeReply;
}

/** Any JSON body with status 200 (default): for malformed or unusual model output. */
export interface FakeRawReply {
  raw: unknown;
  status?: number;
}

/** Destroys the connection without answering (a network failure, seen as a connection error). */
export interface FakeHangUpReply {
  hangUp: true;
}

export type FakeReplyFunction = (request: RecordedRequest) => FakeReply | Promise<FakeReply>;

export type FakeReply =
  | FakeTextReply
  | FakeToolUseReply
  | FakeErrorReply
  | FakeDelayReply
  | FakeRawReply
  | FakeHangUpReply
  | FakeReplyFunction;

export interface FakeAnthropic {
  /** Pass as the SDK's `baseURL` (or `[llm] base_url`). */
  readonly baseUrl: string;
  /** Every request received, in arrival order. */
  readonly requests: RecordedRequest[];
  /** Requests currently being answered (a delayed reply counts until it is sent or dropped). */
  readonly inFlight: number;
  /** The highest `inFlight` seen since start. */
  readonly maxInFlight: number;
  /** Appends replies; each HTTP request consumes the next one. */
  enqueue(...replies: FakeReply[]): void;
  /** Answers requests when the queue is empty. A function is called once per request. */
  setDefault(reply: FakeReply): void;
  /** Replies still queued. */
  readonly pending: number;
  /** Requests refused as not fitting the window (`contextWindow`, `maxInputTokens`), either form. */
  readonly refusedTooLong: number;
  /** Forgets queued replies, recorded requests and the peak in-flight count; restores the default. */
  reset(): void;
  /** Stops the server, drops open connections and pending delays. */
  close(): Promise<void>;
}

/**
 * Token counting, as a real server would do it, for tests of the estimate against the real
 * count. `countTokens` says how many tokens a request's prompt holds; `usage.input_tokens` then
 * reports that number (unless the reply sets its own). A request that does not fit is refused
 * the way Anthropic refuses it (HTTP 400 `invalid_request_error`) without consuming a queued
 * reply:
 * - with `contextWindow` W, in both of the real API's forms: input alone above W is
 *   "prompt is too long: N tokens > W maximum"; input that fits but leaves no room for the
 *   request's `max_tokens` M is "input length and `max_tokens` exceed context limit: N + M > W,
 *   decrease input length or `max_tokens` and try again";
 * - with `maxInputTokens` (older tests), only input above it, in the first form.
 */
export interface FakeAnthropicOptions {
  countTokens?: (request: RecordedRequest) => number;
  maxInputTokens?: number;
  contextWindow?: number;
  /** Accounts `cache_control` breakpoints as the API's prompt cache would (see fake-prompt-cache.ts). */
  promptCache?: FakePromptCache;
}

/** Which of the real API's refusals a request got. */
export type RefusalForm = 'prompt_too_long' | 'exceeds_context';
