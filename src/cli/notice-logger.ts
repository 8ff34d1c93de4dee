import type { Writable } from 'node:stream';

/** The two pino-shaped methods the config watcher and the metrics announcement call. */
export interface NoticeLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/**
 * A logger for the terminal chat: one readable notice a line on `stream` (stderr), with the
 * changed keys or the problems a config reload found, instead of JSON log lines.
 */
export function noticeLogger(stream: Writable): NoticeLogger {
  const write = (fields: object, message: string): void => {
    const record = fields as { changes?: unknown; problems?: unknown; error?: unknown; hint?: unknown };
    const details = [record.changes, record.problems].flatMap((list) => (Array.isArray(list) ? list.map(String) : []));
    if (typeof record.error === 'string') details.push(record.error);
    if (typeof record.hint === 'string') details.push(record.hint);
    stream.write(`(${message}${details.length > 0 ? `: ${details.join('; ')}` : ''})\n`);
  };
  return { info: write, warn: write };
}
