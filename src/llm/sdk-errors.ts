import {
  AnthropicError,
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from '@anthropic-ai/sdk';
import { MagpieError } from '../common/errors.js';
import { ModelError, type ModelFailureReason } from './model-error.js';
import { overflowNumbers } from './overflow-numbers.js';

/**
 * Phrases servers use when the prompt does not fit: Anthropic ("prompt is too long", and
 * "input length and `max_tokens` exceed context limit" when the input fits but the answer's
 * room does not),
 * OpenAI-style proxies and llama.cpp ("context length", "context window", "exceeds the
 * available context size").
 */
const CONTEXT_OVERFLOW_PATTERN =
  /prompt is too long|too many (input )?tokens|context (length|window|size|limit)|maximum context|exceeds? (the )?(model's )?(available )?context/i;

export interface ToModelErrorOptions {
  /** Strings that must never appear in a message (the API key). */
  secrets?: readonly string[];
}

/** Maps whatever the SDK threw to a `ModelError` (other Magpie errors pass through). */
export function toModelError(error: unknown, options: ToModelErrorOptions = {}): MagpieError {
  if (error instanceof MagpieError) return error;
  const secrets = (options.secrets ?? []).filter((secret) => secret.length > 0);
  const clean = (text: string): string => redact(text, secrets);
  const rawMessage = error instanceof Error ? error.message : String(error);
  // Keep the original for debugging unless it carries a secret somewhere in its text.
  const cause = clean(rawMessage) === rawMessage ? error : new Error(clean(rawMessage));

  if (error instanceof APIUserAbortError) {
    return new ModelError('aborted', 'model call was aborted', { cause });
  }
  if (error instanceof APIConnectionTimeoutError) {
    return new ModelError('timeout', 'model call timed out', { cause, retryable: true });
  }
  if (error instanceof APIConnectionError) {
    const detail = error.cause instanceof Error ? `: ${clean(error.cause.message)}` : '';
    return new ModelError('connection', `could not reach the model server${detail}`, { cause, retryable: true });
  }
  if (error instanceof APIError && typeof error.status === 'number') {
    const status = error.status;
    const apiMessage = clean(error.apiMessage ?? rawMessage);
    const contextOverflow = status === 413 || (status === 400 && CONTEXT_OVERFLOW_PATTERN.test(apiMessage));
    const reason = reasonFor(status, contextOverflow);
    return new ModelError(reason, `model call failed with HTTP ${status}: ${apiMessage}`, {
      cause,
      status,
      contextOverflow,
      ...(contextOverflow ? { overflow: overflowNumbers(apiMessage) } : {}),
      retryable: isRetryableStatus(status),
      ...(reason === 'authentication' ? { hint: 'check the API key variable named by [llm] api_key_env' } : {}),
    });
  }
  if (error instanceof AnthropicError) {
    return new ModelError('bad_request', `model call refused by the client: ${clean(rawMessage)}`, { cause });
  }
  return new ModelError('bad_response', `model call failed: ${clean(rawMessage)}`, { cause });
}

export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

function reasonFor(status: number, contextOverflow: boolean): ModelFailureReason {
  if (contextOverflow) return 'context_overflow';
  if (status === 429) return 'rate_limited';
  if (status === 529) return 'overloaded';
  if (status === 408) return 'timeout';
  if (status >= 500) return 'server_error';
  if (status === 401 || status === 403) return 'authentication';
  return 'bad_request';
}

function redact(text: string, secrets: readonly string[]): string {
  let result = text;
  for (const secret of secrets) result = result.split(secret).join('[redacted]');
  return result;
}
