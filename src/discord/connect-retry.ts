import { DiscordAPIError, DiscordjsError, DiscordjsErrorCodes } from 'discord.js';
import { errorMessage, MagpieError } from '../common/errors.js';

/**
 * Gateway errors no retry can cure: Discord refused who we are or what we asked for. They come
 * out of `client.login` as plain errors from @discordjs/ws, so they are recognised by message.
 */
const REFUSALS: ReadonlyArray<{ pattern: RegExp; hint: string }> = [
  {
    pattern: /disallowed intents/i,
    hint: 'enable the Message Content intent under Bot at https://discord.com/developers/applications (Privileged Gateway Intents)',
  },
  { pattern: /invalid intents/i, hint: 'this build asks for intents Discord does not know; upgrade Magpie' },
  { pattern: /authentication failed/i, hint: 'the token was refused: reset it under Bot in the developer portal and set it again' },
  { pattern: /sharding is required/i, hint: 'the bot is in too many guilds for one connection: run magpie start --shards auto' },
  { pattern: /invalid shard/i, hint: 'check --shards and --shard-ids' },
  { pattern: /invalid API version/i, hint: 'upgrade Magpie' },
];

/**
 * Decides whether a failed first connection is Discord saying no (a rejected token, intents the
 * application may not use), which stops the bot with this error, or anything else (DNS, refused
 * or reset connections, timeouts, 5xx, 429), which is worth another attempt: returns the
 * refusal, or undefined when the attempt may simply be repeated.
 */
export function connectRefusal(error: unknown, tokenEnv: string): MagpieError | undefined {
  if (error instanceof DiscordjsError && error.code === DiscordjsErrorCodes.TokenInvalid) {
    return new MagpieError('discord_token_rejected', `Discord rejected the bot token in ${tokenEnv} (401 Unauthorized)`, {
      cause: error,
      context: { status: 401 },
      hint: `copy the token again from Bot → Reset Token at https://discord.com/developers/applications and set ${tokenEnv}`,
    });
  }
  if (error instanceof DiscordAPIError && error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429) {
    return new MagpieError('discord_refused', `Discord refused the connection: ${error.message} (HTTP ${error.status})`, {
      cause: error,
      context: { status: error.status },
    });
  }
  const message = errorMessage(error);
  for (const refusal of REFUSALS) {
    if (refusal.pattern.test(message)) {
      return new MagpieError('discord_refused', `Discord refused the connection: ${message}`, { cause: error, hint: refusal.hint });
    }
  }
  return undefined;
}

/** How long to wait before attempt `attempt + 1` (attempt counts from 1). */
export interface BackoffOptions {
  /** First wait, before jitter (default 1 s). */
  firstMs?: number;
  /** Longest wait, before jitter (default 60 s). */
  maxMs?: number;
  /** In [0, 1); Math.random by default. */
  random?: () => number;
}

/**
 * Doubling waits with "equal jitter": half the wait is fixed, half is random, so many bots that
 * lost the same network do not all come back in the same second, and none waits less than half.
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions = {}): number {
  const first = options.firstMs ?? 1_000;
  const max = options.maxMs ?? 60_000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(max, first * 2 ** Math.min(30, Math.max(0, attempt - 1)));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** One failed attempt, as reported to the caller before the wait. */
export interface FailedAttempt {
  attempt: number;
  error: unknown;
  delayMs: number;
}

export interface RetryUntilConnectedOptions extends BackoffOptions {
  /** Makes one attempt; resolves when connected. */
  attempt: (attempt: number) => Promise<void>;
  /** The error to stop with (often the one given), or undefined to retry. */
  refusal: (error: unknown) => unknown;
  /** Called after each failure that will be retried, before waiting. */
  onRetry: (failed: FailedAttempt) => void | Promise<void>;
  /** Ends the waiting: the promise then resolves to `'aborted'`. */
  signal?: AbortSignal;
}

/**
 * Repeats `attempt` for as long as it fails with something worth retrying, waiting a jittered,
 * doubling delay between attempts. Resolves `'connected'` or `'aborted'`; rejects with the
 * refusal when Discord says no.
 */
export async function retryUntilConnected(options: RetryUntilConnectedOptions): Promise<'connected' | 'aborted'> {
  for (let attempt = 1; ; attempt += 1) {
    if (options.signal?.aborted) return 'aborted';
    try {
      await options.attempt(attempt);
      return 'connected';
    } catch (error) {
      if (options.signal?.aborted) return 'aborted';
      const refusal = options.refusal(error);
      if (refusal !== undefined) throw refusal;
      const delayMs = backoffDelayMs(attempt, options);
      await options.onRetry({ attempt, error, delayMs });
      if (!(await sleep(delayMs, options.signal))) return 'aborted';
    }
  }
}

/** False when the signal ended the wait early. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
