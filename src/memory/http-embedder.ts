import { MagpieError } from '../common/errors.js';
import type { HttpEmbedderSettings } from '../config/types.js';
import { normalizeInPlace, type Embedder } from './embedder.js';

export interface HttpEmbedderOptions {
  settings: HttpEmbedderSettings;
  env?: NodeJS.ProcessEnv;
  fetch?: typeof fetch;
  /** Wait before retry number `attempt` (1-based); exponential by default. Tests shorten it. */
  backoffMs?: (attempt: number) => number;
}

/** An embeddings call that failed; `retryable` says whether trying again may help. */
export class EmbeddingError extends MagpieError {
  override name = 'EmbeddingError';
  constructor(message: string, options: { status?: number; attempt?: number; retryable: boolean; cause?: unknown; hint?: string }) {
    super('embedding_failed', message, {
      retryable: options.retryable,
      cause: options.cause,
      context: { status: options.status, attempt: options.attempt },
      ...(options.hint ? { hint: options.hint } : {}),
    });
  }
}

/**
 * Calls any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, llama.cpp, vLLM, TEI, hosted
 * APIs): texts go out in batches of `batchSize`, each request is bounded by `timeoutMs`, and
 * 429, 5xx and network failures are retried with exponential backoff up to `maxRetries` times.
 * A vector of the wrong length is refused with an error naming the configured dimension.
 */
export class HttpEmbedder implements Embedder {
  readonly name: string;
  readonly dimension: number;
  private readonly settings: HttpEmbedderSettings;
  private readonly apiKey: string | undefined;
  private readonly fetchFunction: typeof fetch;
  private readonly backoffMs: (attempt: number) => number;

  constructor(options: HttpEmbedderOptions) {
    this.settings = options.settings;
    this.name = `http:${options.settings.model}`;
    this.dimension = options.settings.dimension;
    const env = options.env ?? process.env;
    this.apiKey = options.settings.apiKeyEnv ? env[options.settings.apiKeyEnv] || undefined : undefined;
    this.fetchFunction = options.fetch ?? fetch;
    this.backoffMs = options.backoffMs ?? ((attempt) => Math.min(8_000, 250 * 2 ** (attempt - 1)));
  }

  async embed(texts: string[]): Promise<Float32Array[]> {
    const vectors: Float32Array[] = [];
    const batchSize = Math.max(1, this.settings.batchSize);
    for (let start = 0; start < texts.length; start += batchSize) {
      vectors.push(...(await this.embedBatch(texts.slice(start, start + batchSize))));
    }
    return vectors;
  }

  private async embedBatch(texts: string[]): Promise<Float32Array[]> {
    const errors: EmbeddingError[] = [];
    for (let attempt = 1; attempt <= this.settings.maxRetries + 1; attempt += 1) {
      try {
        return await this.request(texts, attempt);
      } catch (error) {
        const failure =
          error instanceof EmbeddingError
            ? error
            : new EmbeddingError(`embeddings request failed: ${String(error)}`, { attempt, retryable: false, cause: error });
        errors.push(failure);
        if (!failure.retryable || attempt > this.settings.maxRetries) break;
        await new Promise((resolve) => setTimeout(resolve, this.backoffMs(attempt)));
      }
    }
    const last = errors[errors.length - 1]!;
    if (errors.length === 1) throw last;
    throw new EmbeddingError(`${last.message} (after ${errors.length} attempts)`, {
      attempt: errors.length,
      retryable: last.retryable,
      cause: errors,
      ...(typeof last.context.status === 'number' ? { status: last.context.status } : {}),
    });
  }

  private async request(texts: string[], attempt: number): Promise<Float32Array[]> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    let response: Response;
    try {
      response = await this.fetchFunction(this.settings.url, {
        method: 'POST',
        headers,
        body: JSON.stringify({ model: this.settings.model, input: texts }),
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
    } catch (error) {
      const timedOut = error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
      throw new EmbeddingError(
        timedOut
          ? `embeddings request to ${this.settings.url} timed out after ${this.settings.timeoutMs} ms`
          : `embeddings request to ${this.settings.url} failed: ${error instanceof Error ? error.message : String(error)}`,
        { attempt, retryable: true, cause: error },
      );
    }
    if (!response.ok) {
      const body = await response.text().catch(() => '');
      const retryable = response.status === 429 || response.status >= 500;
      throw new EmbeddingError(`embeddings endpoint answered HTTP ${response.status}: ${body.slice(0, 200)}`, {
        status: response.status,
        attempt,
        retryable,
        ...(response.status === 401 || response.status === 403
          ? { hint: `set the API key in the environment variable ${this.settings.apiKeyEnv}` }
          : {}),
      });
    }
    let payload: unknown;
    try {
      payload = await response.json();
    } catch (error) {
      throw new EmbeddingError('embeddings endpoint returned a body that is not JSON', { attempt, retryable: false, cause: error });
    }
    return this.parse(payload, texts.length, attempt);
  }

  private parse(payload: unknown, expected: number, attempt: number): Float32Array[] {
    const data = (payload as { data?: unknown }).data;
    if (!Array.isArray(data) || data.length !== expected) {
      throw new EmbeddingError(
        `embeddings endpoint returned ${Array.isArray(data) ? data.length : 'no'} vectors for ${expected} texts`,
        { attempt, retryable: false },
      );
    }
    const ordered = [...data].sort(
      (left, right) => ((left as { index?: number }).index ?? 0) - ((right as { index?: number }).index ?? 0),
    );
    return ordered.map((item) => {
      const embedding = (item as { embedding?: unknown }).embedding;
      if (!Array.isArray(embedding) || embedding.some((value) => typeof value !== 'number')) {
        throw new EmbeddingError('embeddings endpoint returned an item without a numeric embedding', { attempt, retryable: false });
      }
      if (embedding.length !== this.dimension) {
        throw new EmbeddingError(
          `embeddings endpoint returned vectors of dimension ${embedding.length}, but memory.http.dimension is ${this.dimension}`,
          { attempt, retryable: false, hint: `set [memory.http] dimension = ${embedding.length} (the vectors are rebuilt)` },
        );
      }
      return normalizeInPlace(Float32Array.from(embedding as number[]));
    });
  }
}
