import pino, { type DestinationStream, type Logger } from 'pino';
import { createRequire } from 'node:module';
import type pinoPretty from 'pino-pretty';
import type { LogLevel } from '../config/types.js';
import { scrubbingDestination, secretValuesFrom } from './scrub-secrets.js';

export type { Logger } from 'pino';

const LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Environment variable that overrides `[logging] level`. */
export const LOG_LEVEL_ENV = 'LOG_LEVEL';

/**
 * Secret-bearing fields, wherever a log call puts them (top level or one object down, plus
 * HTTP headers). Config objects hold only variable names, but errors from HTTP clients and
 * hand-built objects may carry the real thing.
 */
export const REDACTED_PATHS: readonly string[] = [
  'token',
  'apiKey',
  'api_key',
  'authorization',
  'password',
  'secret',
  '*.token',
  '*.apiKey',
  '*.api_key',
  '*.authorization',
  '*.password',
  '*.secret',
  'headers.authorization',
  'headers.cookie',
  'headers["x-api-key"]',
  '*.headers.authorization',
  '*.headers.cookie',
  '*.headers["x-api-key"]',
];

export interface CreateLoggerOptions {
  /** Level from `[logging] level`; `LOG_LEVEL` in `env` wins when it is a valid level. Default info. */
  level?: LogLevel;
  /** Where LOG_LEVEL is read; default process.env. */
  env?: NodeJS.ProcessEnv;
  /**
   * Human-readable lines instead of JSON. Default: true when writing to stdout and stdout is a
   * terminal. Pretty printing runs in-process (no worker thread), so it also works bundled and
   * in tests.
   */
  pretty?: boolean;
  /** Where lines go; default stdout. Commands whose stdout is data (`--json`) pass process.stderr. */
  destination?: NodeJS.WritableStream | DestinationStream;
  /** Extra fields on every line (e.g. `{ component: 'discord' }`). */
  base?: Record<string, unknown>;
  /**
   * More environment variables whose values must never be written (the config's `token_env`,
   * `api_key_env`). DISCORD_TOKEN, ANTHROPIC_API_KEY, EMBEDDINGS_API_KEY and any variable named
   * like a token, key, secret or password are always scrubbed.
   */
  secretEnv?: readonly string[];
}

/** True for a pino level name this config accepts (`info`, `debug`...). */
export function isLogLevel(value: string | undefined): value is LogLevel {
  return value !== undefined && (LEVELS as readonly string[]).includes(value);
}

/** The effective level: a valid `LOG_LEVEL` wins over the config's level. */
export function resolveLogLevel(configured: LogLevel | undefined, env: NodeJS.ProcessEnv = process.env): LogLevel {
  const fromEnv = env[LOG_LEVEL_ENV]?.trim().toLowerCase();
  if (fromEnv && (LEVELS as readonly string[]).includes(fromEnv)) return fromEnv as LogLevel;
  return configured ?? 'info';
}

/**
 * pino-pretty, loaded only when a terminal asks for it: a command whose logs go to a pipe or a
 * file (every service, every script) does not pay for loading it.
 */
function loadPretty(): typeof pinoPretty {
  return createRequire(import.meta.url)('pino-pretty') as typeof pinoPretty;
}

/** A pino logger: JSON lines (or pretty on a terminal), secrets redacted. */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  const env = options.env ?? process.env;
  const level = resolveLogLevel(options.level, env);
  const toStdout = options.destination === undefined || options.destination === process.stdout;
  const usePretty = options.pretty ?? (toStdout && process.stdout.isTTY === true);
  const output: DestinationStream = usePretty
    ? loadPretty()({
        colorize: toStdout && process.stdout.isTTY === true,
        sync: true,
        destination: options.destination ?? 1,
        translateTime: 'SYS:HH:MM:ss.l',
        ignore: 'pid,hostname',
      })
    : ((options.destination as DestinationStream | undefined) ?? pino.destination({ dest: 1, sync: true }));
  // Scrubbed before pretty-printing too, so a secret never reaches any output form.
  const secrets = secretValuesFrom(env, options.secretEnv);
  const destination: DestinationStream = secrets.length === 0 ? output : scrubbingDestination(output, secrets);
  const logger = pino(
    {
      level,
      base: options.base ?? {},
      redact: { paths: [...REDACTED_PATHS], censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Level names, not pino's numbers: every line Magpie writes, audit lines included, reads
      // `"level":"info"` with an ISO `time`, the one convention of docs/json-output.md.
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
  const requested = env[LOG_LEVEL_ENV];
  if (requested !== undefined && requested.trim() !== '' && level !== requested.trim().toLowerCase()) {
    logger.warn({ event: 'log_level_ignored', value: requested }, `${LOG_LEVEL_ENV} is not a level (${LEVELS.join(', ')}); using ${level}`);
  }
  return logger;
}
