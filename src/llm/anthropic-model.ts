import type Anthropic from '@anthropic-ai/sdk';
import type {
  ContentBlockParam,
  Message,
  MessageCreateParamsNonStreaming,
  MessageParam,
  Tool,
} from '@anthropic-ai/sdk/resources/messages';
import { InputError } from '../common/errors.js';
import { cacheMinTokensFor } from '../config/defaults.js';
import type { LlmSettings } from '../config/types.js';
import type {
  ChatModel,
  ContentBlock,
  ModelCallOptions,
  ModelMessage,
  ModelRequest,
  ModelResponse,
} from './chat-model.js';
import { placeCacheBreakpoints, type CachePlacement } from './cache-breakpoints.js';
import { abortedModelError, ModelError } from './model-error.js';

/**
 * Sent when a custom base URL is set and no key is: local servers (llama.cpp, Ollama, vLLM)
 * ignore the key, but the SDK refuses to send a request without one.
 */
const PLACEHOLDER_API_KEY = 'magpie-no-key';

export interface AnthropicModelOptions {
  /** Where the API key variable is read; defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Replaces the global `fetch` (tests, proxies). */
  fetch?: typeof fetch;
}

/**
 * The model id the hints, `config.toml` and the README suggest: one the SDK does not warn is
 * deprecated (a test sends it through the SDK and watches for the warning).
 */
export const SUGGESTED_MODEL = 'claude-sonnet-4-6';

/**
 * The model behind `ChatModel`: the official SDK pointed at Anthropic or at any
 * Anthropic-compatible endpoint (`[llm] base_url`). Fails fast, at construction, when no key
 * is available and the endpoint needs one.
 */
export function createAnthropicModel(settings: LlmSettings, options: AnthropicModelOptions = {}): ChatModel {
  if (settings.model.trim() === '') {
    throw new InputError('no model is configured ([llm] model is empty)', {
      context: { key: 'llm.model' },
      hint: `set [llm] model in config.toml, e.g. model = "${SUGGESTED_MODEL}"`,
    });
  }
  const env = options.env ?? process.env;
  const baseUrl = settings.baseUrl.trim();
  const configuredKey = env[settings.apiKeyEnv]?.trim() ?? '';
  if (configuredKey === '' && baseUrl === '') {
    throw new InputError(`no API key: the environment variable ${settings.apiKeyEnv} is not set`, {
      context: { key: 'llm.api_key_env', variable: settings.apiKeyEnv },
      hint:
        `export ${settings.apiKeyEnv}=<your Anthropic API key>, or set [llm] base_url to an ` +
        'Anthropic-compatible server (a local llama.cpp or Ollama needs no key)',
    });
  }
  const apiKey = configuredKey === '' ? PLACEHOLDER_API_KEY : configuredKey;

  const clientOptions: ConstructorParameters<typeof Anthropic>[0] = {
    apiKey,
    // null (not undefined) so the SDK does not fall back to ANTHROPIC_BASE_URL behind the
    // config's back: the endpoint is decided by config.toml alone.
    baseURL: baseUrl === '' ? null : baseUrl,
    timeout: settings.timeoutMs,
    maxRetries: settings.maxRetries,
    // The SDK would otherwise log to the console by itself; failures reach us as errors.
    logLevel: 'off',
    openTelemetry: false,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  };

  // The SDK (and its error classes) load with the first call, not with the module: every
  // command that opens the app but never calls the model (memory, replay, export) skips it.
  let loading: Promise<{ client: Anthropic; toModelError: typeof import('./sdk-errors.js').toModelError }> | undefined;
  const sdk = () =>
    (loading ??= Promise.all([import('@anthropic-ai/sdk'), import('./sdk-errors.js')]).then(([{ default: AnthropicClient }, { toModelError }]) => ({
      client: new AnthropicClient(clientOptions),
      toModelError,
    })));

  const caching: Omit<CachePlacement, 'systemBreaks'> | undefined =
    settings.promptCache === 'off' ? undefined : { lifetime: settings.promptCache, minTokens: cacheMinTokensFor(settings.model, settings.cacheMinTokens) };
  const paramsFor = (request: ModelRequest): MessageCreateParamsNonStreaming => {
    const params = toSdkParams(settings.model, request);
    if (caching) placeCacheBreakpoints(params, { ...caching, ...(request.systemBreaks ? { systemBreaks: request.systemBreaks } : {}) });
    return params;
  };

  return {
    model: settings.model,
    async createMessage(request: ModelRequest, callOptions: ModelCallOptions = {}): Promise<ModelResponse> {
      if (callOptions.signal?.aborted) throw abortedModelError(callOptions.signal);
      let message: Message;
      const { client, toModelError } = await sdk();
      if (callOptions.signal?.aborted) throw abortedModelError(callOptions.signal);
      const requestOptions = {
        ...(callOptions.signal ? { signal: callOptions.signal } : {}),
        ...(callOptions.timeoutMs !== undefined ? { timeout: callOptions.timeoutMs } : {}),
      };
      try {
        const onText = callOptions.onText;
        if (onText) {
          const stream = client.messages.stream(paramsFor(request), requestOptions);
          stream.on('text', (delta) => {
            // Whoever shows the text must not be able to break the call.
            try {
              onText(delta);
            } catch {
              // ignored on purpose
            }
          });
          message = await stream.finalMessage();
        } else {
          message = await client.messages.create(paramsFor(request), requestOptions);
        }
      } catch (error) {
        if (callOptions.signal?.aborted) throw abortedModelError(callOptions.signal);
        throw toModelError(error, { secrets: configuredKey === '' ? [] : [configuredKey] });
      }
      return fromSdkMessage(message);
    },
  };
}

function toSdkParams(model: string, request: ModelRequest): MessageCreateParamsNonStreaming {
  const params: MessageCreateParamsNonStreaming = {
    model,
    max_tokens: request.maxTokens,
    system: request.system,
    messages: request.messages.map(toSdkMessage),
  };
  if (request.tools && request.tools.length > 0) {
    params.tools = request.tools.map(
      (tool): Tool => ({
        name: tool.name,
        description: tool.description,
        input_schema: tool.input_schema as Tool.InputSchema,
      }),
    );
    if (request.toolChoice) params.tool_choice = request.toolChoice;
  }
  return params;
}

function toSdkMessage(message: ModelMessage): MessageParam {
  if (typeof message.content === 'string') return { role: message.role, content: message.content };
  const blocks: ContentBlockParam[] = [];
  for (const block of message.content) {
    if (block.type === 'text') {
      // The API rejects empty and whitespace-only text blocks.
      if (block.text.trim() !== '') blocks.push({ type: 'text', text: block.text });
    } else if (block.type === 'tool_use') {
      blocks.push({ type: 'tool_use', id: block.id, name: block.name, input: block.input });
    } else if (block.type === 'image') {
      blocks.push({ type: 'image', source: { ...block.source } });
    } else {
      blocks.push({
        type: 'tool_result',
        tool_use_id: block.tool_use_id,
        content: block.content,
        ...(block.is_error ? { is_error: true } : {}),
      });
    }
  }
  return { role: message.role, content: blocks };
}

/**
 * Keeps text and tool_use blocks (the only ones Magpie asks for) and checks their shape: a
 * compatible server may send odd output, and nothing downstream should trip over it.
 */
export function fromSdkMessage(message: unknown): ModelResponse {
  const body = message as Partial<Message> | null;
  if (!body || typeof body !== 'object' || !Array.isArray(body.content)) {
    throw new ModelError('bad_response', 'the model answered without a content array', { retryable: false });
  }
  const content: ContentBlock[] = [];
  let toolIndex = 0;
  for (const raw of body.content as unknown[]) {
    if (!raw || typeof raw !== 'object') continue;
    const block = raw as Record<string, unknown>;
    if (block['type'] === 'text' && typeof block['text'] === 'string') {
      content.push({ type: 'text', text: block['text'] });
    } else if (block['type'] === 'tool_use') {
      toolIndex += 1;
      content.push({
        type: 'tool_use',
        id: typeof block['id'] === 'string' && block['id'] !== '' ? block['id'] : `toolu_local_${toolIndex}`,
        name: typeof block['name'] === 'string' ? block['name'] : '',
        input: block['input'],
      });
    }
  }
  const usage = (body.usage ?? {}) as Partial<Message['usage']>;
  const cacheWrite = nonNegative(usage.cache_creation_input_tokens);
  const cacheWrite1h = Math.min(cacheWrite, nonNegative(usage.cache_creation?.ephemeral_1h_input_tokens));
  const cacheRead = nonNegative(usage.cache_read_input_tokens);
  return {
    content,
    stopReason: typeof body.stop_reason === 'string' ? body.stop_reason : 'end_turn',
    usage: {
      inputTokens: nonNegative(usage.input_tokens),
      outputTokens: nonNegative(usage.output_tokens),
      // Only servers that cache send these; a usage without them stays as it was.
      ...(cacheWrite > 0 ? { cacheWriteTokens: cacheWrite } : {}),
      ...(cacheWrite1h > 0 ? { cacheWrite1hTokens: cacheWrite1h } : {}),
      ...(cacheRead > 0 ? { cacheReadTokens: cacheRead } : {}),
    },
  };
}

function nonNegative(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}
