/**
 * A fake Anthropic Messages API on loopback, so tests run the real `@anthropic-ai/sdk` over
 * real HTTP. Replies are scripted: queued replies are consumed one per HTTP request (so each
 * SDK retry takes the next one), then the default answers. The default is an error, so a
 * test that forgot to script the model fails instead of passing by accident.
 *
 *     const fake = await startFakeAnthropic();
 *     const model = createAnthropicModel({ ...DEFAULTS.llm, model: 'claude-test', baseUrl: fake.baseUrl,
 *       maxRetries: 0, timeoutMs: 2_000 }, { env: {} });          // custom base URL: no key needed
 *     fake.enqueue(
 *       { toolUse: [{ name: 'memory_save', input: { content: 'Ana likes tea', memory_type: 'preference' } }] },
 *       { text: 'Ana said she likes tea.' },
 *       { status: 429 },                                          // an Anthropic-shaped error
 *       { delayMs: 500, then: { text: 'slow' } },                 // dropped cleanly if the client gives up
 *       (request) => ({ text: `echo ${request.body.messages.length}` }),
 *     );
 *     ... fake.requests[0].body.system, fake.requests[0].body.tools, fake.requests[0].headers ...
 *     await fake.close();
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { sniffImage } from '../../src/attachments/image-info.js';
import type { FakePromptCache } from './fake-prompt-cache.js';

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

const NO_REPLY_MESSAGE = 'fake-anthropic: no reply queued';

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

/** The refusal a request of `tokens` input asking for `maxTokens` gets, if any, in the real API's words. */
export function refusalFor(tokens: number, maxTokens: number, limits: { contextWindow?: number; maxInputTokens?: number }): { form: RefusalForm; message: string } | undefined {
  const window = limits.contextWindow ?? limits.maxInputTokens;
  if (window === undefined) return undefined;
  if (tokens > window) return { form: 'prompt_too_long', message: `prompt is too long: ${tokens} tokens > ${window} maximum` };
  if (limits.contextWindow !== undefined && tokens + maxTokens > window) {
    return {
      form: 'exceeds_context',
      message: `input length and \`max_tokens\` exceed context limit: ${tokens} + ${maxTokens} > ${window}, decrease input length or \`max_tokens\` and try again`,
    };
  }
  return undefined;
}

/** The text a request puts before the model: system prompt, every block of every message, tool definitions. */
export function promptText(body: any): string {
  const { text, tools } = promptParts(body);
  return tools === '' ? text : `${text}\n${tools}`;
}

/**
 * A request's text in two parts, as a tokenizer meets them: the prose (system prompt, text
 * blocks, tool definitions) and the tool traffic (each call's name and input JSON, each result's
 * text). A result given as a list of blocks is read as the API reads it: its text blocks' text
 * (its images are charged by their pixels, see `imageTokens`), never the JSON of the list.
 */
export function promptParts(body: any): { text: string; tools: string } {
  const text: string[] = [];
  const tools: string[] = [];
  const system = body?.system;
  if (typeof system === 'string') text.push(system);
  else if (Array.isArray(system)) for (const block of system) text.push(String(block?.text ?? ''));
  for (const message of Array.isArray(body?.messages) ? body.messages : []) {
    if (typeof message?.content === 'string') {
      text.push(message.content);
      continue;
    }
    for (const block of Array.isArray(message?.content) ? message.content : []) {
      if (block?.type === 'text') text.push(String(block.text ?? ''));
      else if (block?.type === 'tool_use') tools.push(`${block.name ?? ''} ${JSON.stringify(block.input ?? {})}`);
      else if (block?.type === 'tool_result') tools.push(toolResultText(block.content));
    }
  }
  if (Array.isArray(body?.tools)) text.push(JSON.stringify(body.tools));
  return { text: text.join('\n'), tools: tools.join('\n') };
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.filter((block) => block?.type === 'text').map((block) => String(block.text ?? '')).join('\n');
}

/**
 * A tokenizer stand-in: one token per CJK character (Han, kana, Hangul, full-width forms), one per
 * `charsPerToken` other characters (default 4, as Latin prose goes), plus `perMessage` for each
 * message's framing. Tool calls' input and tool results' text are counted at `toolCharsPerToken`
 * (default: as prose): JSON, logs and data rows are denser in tokens than prose, about 3 characters
 * a token for search results and records and 2 for log lines by Anthropic's published tokenizer
 * (`@anthropic-ai/tokenizer`). Images cost what the real API charges, about width × height / 750
 * after it scales them down (long edge at most 1,568 pixels, about 1.15 megapixels), never the
 * length of their base64 text, in a message or in a tool result; offering tools adds the tool-use
 * system prompt the API puts in front (`toolSystemTokens`: 346 with `auto` or `none`, 313 when a
 * tool is forced), besides the definitions' own text.
 */
export function characterTokenCounter(
  options: { charsPerToken?: number; toolCharsPerToken?: number; perMessage?: number; toolSystemTokens?: number; imageScale?: number } = {},
): (request: RecordedRequest) => number {
  // A server that charges images otherwise than their pixels say (how the bot copes is tested).
  const imageScale = options.imageScale ?? 1;
  const charsPerToken = options.charsPerToken ?? 4;
  const toolCharsPerToken = options.toolCharsPerToken ?? charsPerToken;
  const perMessage = options.perMessage ?? 3;
  return (request) => {
    const { text, tools: toolText } = promptParts(request.body);
    const messages = Array.isArray(request.body?.messages) ? request.body.messages.length : 0;
    const tools = Array.isArray(request.body?.tools) && request.body.tools.length > 0;
    const forced = request.body?.tool_choice?.type === 'any' || request.body?.tool_choice?.type === 'tool';
    const toolSystem = tools ? (options.toolSystemTokens ?? (forced ? 313 : 346)) : 0;
    return (
      scriptTokens(text, charsPerToken) +
      scriptTokens(toolText, toolCharsPerToken) +
      perMessage * messages +
      Math.round(imageScale * imageTokens(request.body)) +
      toolSystem
    );
  };
}

/** One token per CJK character, one per `charsPerToken` of the others. */
function scriptTokens(text: string, charsPerToken: number): number {
  let cjk = 0;
  let other = 0;
  for (const char of text) {
    if (/[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]/.test(char)) cjk += 1;
    else other += 1;
  }
  return cjk + Math.ceil(other / charsPerToken);
}

/** What the real API charges for the images of a request. */
export function imageTokens(body: any): number {
  let total = 0;
  for (const message of Array.isArray(body?.messages) ? body.messages : []) {
    for (const block of imageBlocks(message?.content)) {
      const data = typeof block.source?.data === 'string' ? block.source.data : '';
      // The header is enough to know the size (a JPEG's frame header may come after its tables).
      const info = sniffImage(Buffer.from(data.slice(0, 87_384), 'base64'));
      total += info && info.width > 0 && info.height > 0 ? scaledImageTokens(info.width, info.height) : 1600;
    }
  }
  return total;
}

/** The image blocks of a message's content, those inside its tool results included. */
function imageBlocks(content: unknown): any[] {
  if (!Array.isArray(content)) return [];
  return content.flatMap((block) => (block?.type === 'image' ? [block] : block?.type === 'tool_result' ? imageBlocks(block.content) : []));
}

/** width × height / 750 of the image as the API resizes it. */
export function scaledImageTokens(width: number, height: number): number {
  const scale = Math.min(1, 1568 / Math.max(width, height), Math.sqrt(1_150_000 / (width * height)));
  return Math.ceil((Math.floor(width * scale) * Math.floor(height * scale)) / 750);
}

export async function startFakeAnthropic(options: FakeAnthropicOptions = {}): Promise<FakeAnthropic> {
  const requests: RecordedRequest[] = [];
  const queue: FakeReply[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const initialDefault: FakeReply = {
    status: 500,
    message: NO_REPLY_MESSAGE,
    // A missing script is a test bug, not a blip: tell the SDK not to retry it.
    headers: { 'x-should-retry': 'false' },
  };
  let defaultReply: FakeReply = initialDefault;
  let inFlight = 0;
  let maxInFlight = 0;
  let messageCounter = 0;
  let toolCounter = 0;
  let refused = 0;

  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const recorded: RecordedRequest = {
        method: request.method ?? 'GET',
        path: request.url ?? '/',
        headers: flattenHeaders(request.headers),
        body: parseJson(text),
        index: requests.length + 1,
      };
      requests.push(recorded);
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        inFlight -= 1;
      };
      // 'close' fires both after a full answer and when the client aborts mid-delay.
      response.on('close', finish);

      if (recorded.method !== 'POST' || !recorded.path.startsWith('/v1/messages')) {
        sendJson(response, 404, errorBody(404, `fake-anthropic: no route ${recorded.method} ${recorded.path}`));
        return;
      }
      const tokens = options.countTokens?.(recorded);
      recorded.inputTokens = tokens;
      const refusal = tokens === undefined ? undefined : refusalFor(tokens, Number(recorded.body?.max_tokens) || 0, options);
      if (refusal) {
        // Refused before any reply is generated: the queued reply stays for the retry.
        refused += 1;
        recorded.refusal = refusal.form;
        sendJson(response, 400, errorBody(400, refusal.message));
        return;
      }
      const cacheProblem = options.promptCache?.problem(recorded.body);
      if (cacheProblem !== undefined) return sendJson(response, 400, errorBody(400, cacheProblem));
      const reply = queue.length > 0 ? queue.shift()! : defaultReply;
      answer(reply, recorded, response).catch((error: unknown) => {
        if (!response.headersSent && !response.destroyed) {
          sendJson(response, 500, errorBody(500, `fake-anthropic: reply failed: ${String(error)}`));
        }
      });
    });
  });

  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // A client that hangs up mid-request must never take the fake down with it.
  server.on('clientError', (_error, socket) => socket.destroy());

  async function answer(reply: FakeReply, recorded: RecordedRequest, response: http.ServerResponse): Promise<void> {
    if (response.destroyed) return;
    if (typeof reply === 'function') {
      return answer(await reply(recorded), recorded, response);
    }
    if ('delayMs' in reply) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          resolve();
        }, reply.delayMs);
        timers.add(timer);
        response.on('close', () => {
          clearTimeout(timer);
          timers.delete(timer);
          resolve();
        });
      });
      return answer(reply.then, recorded, response);
    }
    if ('hangUp' in reply) {
      response.socket?.destroy();
      return;
    }
    if ('raw' in reply) {
      sendJson(response, reply.status ?? 200, reply.raw);
      return;
    }
    if ('status' in reply) {
      const headers: Record<string, string> = {};
      if ([408, 409, 429].includes(reply.status) || reply.status >= 500) headers['retry-after-ms'] = '5';
      Object.assign(headers, reply.headers ?? {});
      const body = reply.body ?? errorBody(reply.status, reply.message ?? `fake-anthropic: status ${reply.status}`);
      sendJson(response, reply.status, body, headers);
      return;
    }
    const body = messageBody(reply, recorded);
    if (recorded.body?.stream === true) {
      await sendStream(response, body as StreamedMessage, reply, timers);
      return;
    }
    sendJson(response, 200, body);
  }

  function messageBody(reply: FakeTextReply | FakeToolUseReply, recorded: RecordedRequest): unknown {
    messageCounter += 1;
    const content: unknown[] = [];
    let stopReason: string;
    if ('toolUse' in reply) {
      if (reply.text) content.push({ type: 'text', text: reply.text });
      for (const call of reply.toolUse) {
        toolCounter += 1;
        content.push({
          type: 'tool_use',
          id: call.id ?? `toolu_fake_${toolCounter}`,
          name: call.name,
          input: call.input,
        });
      }
      stopReason = 'tool_use';
    } else {
      content.push({ type: 'text', text: reply.text });
      stopReason = reply.stopReason ?? 'end_turn';
    }
    const outputText = JSON.stringify(content);
    return {
      id: `msg_fake_${messageCounter}`,
      type: 'message',
      role: 'assistant',
      model: typeof recorded.body?.model === 'string' ? recorded.body.model : 'fake-model',
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: {
        ...(options.promptCache
          ? options.promptCache.account(recorded.body, reply.usage?.inputTokens ?? recorded.inputTokens)
          : { input_tokens: reply.usage?.inputTokens ?? recorded.inputTokens ?? Math.ceil(JSON.stringify(recorded.body ?? '').length / 4) }),
        output_tokens: reply.usage?.outputTokens ?? Math.ceil(outputText.length / 4),
      },
    };
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    get inFlight() {
      return inFlight;
    },
    get maxInFlight() {
      return maxInFlight;
    },
    get pending() {
      return queue.length;
    },
    get refusedTooLong() {
      return refused;
    },
    enqueue(...replies: FakeReply[]) {
      queue.push(...replies);
    },
    setDefault(reply: FakeReply) {
      defaultReply = reply;
    },
    reset() {
      queue.length = 0;
      requests.length = 0;
      maxInFlight = inFlight;
      defaultReply = initialDefault;
      refused = 0;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await closed;
    },
  };
}

interface StreamedMessage {
  id: string;
  model: string;
  content: Array<{ type: string; text?: string; id?: string; name?: string; input?: unknown }>;
  stop_reason: string;
  usage: { input_tokens: number; output_tokens: number };
}

/** One message as the Messages API streams it, with the pacing and breakage asked for. */
async function sendStream(
  response: http.ServerResponse,
  message: StreamedMessage,
  options: FakeStreaming,
  timers: Set<NodeJS.Timeout>,
): Promise<void> {
  if (response.destroyed) return;
  response.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    'request-id': `req_fake_${Date.now().toString(36)}`,
  });
  const event = (type: string, data: Record<string, unknown>): void => {
    if (!response.destroyed) response.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  };
  const pause = (ms: number): Promise<void> =>
    ms <= 0
      ? Promise.resolve()
      : new Promise((resolve) => {
          const timer = setTimeout(() => {
            timers.delete(timer);
            resolve();
          }, ms);
          timers.add(timer);
        });
  event('message_start', {
    message: {
      id: message.id,
      type: 'message',
      role: 'assistant',
      model: message.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...message.usage, output_tokens: 1 },
    },
  });
  event('ping', {});
  let textDeltas = 0;
  for (const [index, block] of message.content.entries()) {
    if (block.type === 'text') {
      event('content_block_start', { index, content_block: { type: 'text', text: '' } });
      const text = block.text ?? '';
      const chunks = options.chunks ?? splitEvery(text, 40);
      for (const chunk of chunks) {
        await pause(options.chunkDelayMs ?? 0);
        if (response.destroyed) return;
        if (options.breakAfter !== undefined && textDeltas >= options.breakAfter) {
          response.socket?.destroy();
          return;
        }
        if (options.errorAfter !== undefined && textDeltas >= options.errorAfter) {
          event('error', { error: { type: 'overloaded_error', message: 'fake-anthropic: overloaded midway' } });
          response.end();
          return;
        }
        event('content_block_delta', { index, delta: { type: 'text_delta', text: chunk } });
        textDeltas += 1;
      }
      event('content_block_stop', { index });
    } else {
      event('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      const json = JSON.stringify(block.input ?? {});
      for (const piece of splitEvery(json, 16)) {
        event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
      }
      event('content_block_stop', { index });
    }
  }
  event('message_delta', { delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: message.usage.output_tokens } });
  event('message_stop', {});
  response.end();
}

function splitEvery(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < text.length; at += size) pieces.push(text.slice(at, at + size));
  return pieces;
}

/** Anthropic's error envelope, with the error type its API uses for that status. */
export function errorBody(status: number, message: string): unknown {
  return { type: 'error', error: { type: errorTypeFor(status), message } };
}

function errorTypeFor(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error';
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

function sendJson(
  response: http.ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (response.destroyed) return;
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'request-id': `req_fake_${Date.now().toString(36)}`,
    ...headers,
  });
  response.end(text);
}

function parseJson(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function flattenHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const flat: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    flat[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return flat;
}
