import { MagpieError, type MagpieErrorOptions } from '../common/errors.js';
import type { OverflowNumbers } from './overflow-numbers.js';

/**
 * Why a model call failed, in words stable enough for events and retry decisions
 * (`compaction_failed { reason }`, the apology the channel agent sends).
 */
export type ModelFailureReason =
  | 'rate_limited'
  | 'overloaded'
  | 'server_error'
  | 'timeout'
  | 'connection'
  | 'aborted'
  | 'context_overflow'
  | 'authentication'
  | 'bad_request'
  | 'bad_response'
  | 'empty_summary';

export interface ModelErrorOptions extends MagpieErrorOptions {
  /** HTTP status, when the server answered. */
  status?: number;
  /** The request did not fit the model's context window: compacting and retrying can help. */
  contextOverflow?: boolean;
  /** What the server's overflow refusal said about the request (its real input, the window). */
  overflow?: OverflowNumbers;
}

/**
 * A failed model call. `retryable` says whether the same call may succeed later (429, 5xx,
 * timeouts, dropped connections); `contextOverflow` says the prompt was too long, which a
 * retry alone never fixes but a compaction does. The message never contains the API key.
 */
export class ModelError extends MagpieError {
  override name = 'ModelError';
  readonly reason: ModelFailureReason;
  readonly status: number | undefined;
  readonly contextOverflow: boolean;
  /** Set on a context overflow: the numbers the refusal gave (empty when it gave none, as a 413). */
  readonly overflow: OverflowNumbers | undefined;

  constructor(reason: ModelFailureReason, message: string, options: ModelErrorOptions = {}) {
    const context: Record<string, unknown> = { ...(options.context ?? {}), reason };
    if (options.status !== undefined) context['status'] = options.status;
    super(`model_${reason}`, message, { ...options, context });
    this.reason = reason;
    this.status = options.status;
    this.contextOverflow = options.contextOverflow ?? false;
    this.overflow = options.overflow;
  }
}

/** The error a call rejects with when its signal fires (before or while it runs). */
export function abortedModelError(signal?: AbortSignal): ModelError {
  const cause: unknown = signal?.reason;
  const why = cause instanceof Error && cause.name === 'TimeoutError' ? 'timed out' : 'was aborted';
  return new ModelError(why === 'timed out' ? 'timeout' : 'aborted', `model call ${why}`, {
    cause,
    retryable: why === 'timed out',
  });
}
