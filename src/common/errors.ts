/**
 * The one error base class. Every error Magpie raises on purpose carries a stable `code`,
 * optional typed context (channel id, key path, status, attempt) and whether retrying can help.
 */
export interface MagpieErrorOptions {
  cause?: unknown;
  /** Worth retrying the same call (network blips, 429, 5xx, timeouts). */
  retryable?: boolean;
  /** Ids and numbers that locate the problem: channel id, key path, HTTP status, attempt... */
  context?: Record<string, unknown>;
  /** One sentence telling a person what would fix it. */
  hint?: string;
}

export class MagpieError extends Error {
  override name = 'MagpieError';
  readonly code: string;
  readonly retryable: boolean;
  readonly context: Record<string, unknown>;
  readonly hint: string | undefined;

  constructor(code: string, message: string, options: MagpieErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.context = options.context ?? {};
    this.hint = options.hint;
  }

  /** A short text fit for a terminal: the message and, when known, what would fix it. */
  render(): string {
    return this.hint ? `${this.message}\n  hint: ${this.hint}` : this.message;
  }
}

/** Bad input from outside (config, flags, transcript lines, tool input). Never retryable. */
export class InputError extends MagpieError {
  override name = 'InputError';
  constructor(message: string, options: Omit<MagpieErrorOptions, 'retryable'> = {}) {
    super('bad_input', message, options);
  }
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
