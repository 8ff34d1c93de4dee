import type { EventStream, MagpieEvent } from '../common/events.js';

/** Events an operator should notice: they mean lost summaries or a forced cut. */
export const WARN_EVENTS: ReadonlySet<string> = new Set([
  'compaction_failed',
  'emergency_truncation',
  // The data dir refuses writes, or held something that had to be moved aside.
  'storage_unhealthy',
  // PostgreSQL stopped answering, or another process took this one's writer lock meanwhile.
  'storage_connection_lost',
  'storage_writer_lost',
  'message_store_retry',
  'memory_index_path_moved',
]);

/** Fields that may carry what users wrote; left out unless `includeContent`. */
const CONTENT_FIELDS: ReadonlySet<string> = new Set([
  'content',
  'text',
  'summary',
  'prompt',
  'messages',
  'reply',
  'query',
  'transcript',
]);

/** The two pino methods used; a pino `Logger` fits. */
export interface EventLogSink {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface EventLoggerOptions {
  /** Log message text carried by events too (off by default: never log content by default). */
  includeContent?: boolean;
}

/**
 * Writes every core event as one log line: `event` = the event type, then its ids and numbers
 * (`channel_id`, `tokens_before`...). Failures (`compaction_failed`, any `*_failed`/`*_error`)
 * and `emergency_truncation` are warnings; the rest info. Returns a function that detaches.
 */
export function attachEventLogger(events: EventStream, logger: EventLogSink, options: EventLoggerOptions = {}): () => void {
  return events.subscribe((event) => {
    const fields = eventFields(event, options);
    if (isWarning(event.type)) logger.warn(fields, event.type);
    else logger.info(fields, event.type);
  });
}

export function isWarning(type: string): boolean {
  return WARN_EVENTS.has(type) || type.endsWith('_failed') || type.endsWith('_error');
}

function eventFields(event: MagpieEvent, options: EventLoggerOptions): Record<string, unknown> {
  const { type, ...rest } = event;
  const fields: Record<string, unknown> = { event: type };
  for (const [key, value] of Object.entries(rest)) {
    // A number under such a name is a count (`messages: 13` on compaction_started), not text.
    if (!options.includeContent && CONTENT_FIELDS.has(key) && typeof value !== 'number') continue;
    // `event` is the event's name: a field of the same name must not replace it in the line.
    const name = key === 'event' ? 'event_detail' : key;
    // A long string is cut so one event stays one line.
    fields[name] = typeof value === 'string' && value.length > 500 ? `${value.slice(0, 500)}…` : value;
  }
  return fields;
}
