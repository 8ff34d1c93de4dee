/** Logging: pino set up once at the edge; core code only emits events. */
export {
  LOG_LEVEL_ENV,
  REDACTED_PATHS,
  createLogger,
  resolveLogLevel,
  type CreateLoggerOptions,
  type Logger,
} from './create-logger.js';
export { WARN_EVENTS, attachEventLogger, isWarning, type EventLogSink, type EventLoggerOptions } from './event-logger.js';
export { followConfigLevel } from './follow-config-level.js';
export { SECRET_ENV_NAMES, scrubSecrets, secretValuesFrom } from './scrub-secrets.js';
