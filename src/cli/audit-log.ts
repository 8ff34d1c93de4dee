import { EventStream, type EventListener } from '../common/events.js';
import type { LogLevel } from '../config/types.js';
import { attachEventLogger, createLogger } from '../logging/index.js';
import type { CliIo } from './command.js';

/** Events a command run by hand must leave in the log, as the bot would log them. */
const AUDITED: ReadonlySet<string> = new Set(['user_erased']);

/**
 * A listener that writes audited events (an erasure) to stderr as pino lines, with the same
 * logger, fields and level names as `magpie start`, so one log pipeline reads both.
 */
export function auditLogger(io: CliIo, level: LogLevel): EventListener {
  const audited = new EventStream();
  attachEventLogger(audited, createLogger({ level, env: io.env, destination: io.stderr, pretty: false }));
  return (event) => {
    if (AUDITED.has(event.type)) audited.emit(event);
  };
}
