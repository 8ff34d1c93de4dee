import type { IncomingMessage } from '../context/types.js';
import { InputError } from '../common/errors.js';
import { idProblem } from '../common/outside-text.js';

/** The largest time a JavaScript Date can hold, in milliseconds either side of the epoch. */
const MAX_TIME_MS = 8.64e15;

/**
 * One line of a replay transcript: `{ "id", "channel", "author", "content", "ts"?, "role"? }`.
 * `ts` is an ISO 8601 time or milliseconds since the epoch; `role` is "user" (default) or
 * "assistant".
 */
export interface TranscriptLine {
  id: string;
  channel: string;
  author: string;
  content: string;
  ts?: string | number;
  role?: 'user' | 'assistant';
}

/**
 * Validates one line; throws an InputError naming the line number and the field. `fallbackTime`
 * is used when the line has no `ts`; `NaN` leaves the choice to the caller (see `replayLines`).
 */
export function parseTranscriptLine(text: string, lineNumber: number, fallbackTime: number): IncomingMessage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw lineError(lineNumber, `is not valid JSON (${(error as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw lineError(lineNumber, 'must be a JSON object');
  }
  const line = value as Record<string, unknown>;
  const id = typeof line.id === 'number' && Number.isFinite(line.id) ? String(line.id) : line.id;
  // `author` is the author's id as well as their name: all three are ids.
  requireId(id, 'id', lineNumber);
  requireId(line.channel, 'channel', lineNumber);
  requireId(line.author, 'author', lineNumber);
  if (typeof line.content !== 'string') throw lineError(lineNumber, 'field "content" must be a string');
  const role = line.role ?? 'user';
  if (role !== 'user' && role !== 'assistant') {
    throw lineError(lineNumber, `field "role" must be "user" or "assistant", got ${JSON.stringify(line.role)}`);
  }
  let createdAt = fallbackTime;
  if (line.ts !== undefined && line.ts !== null) {
    createdAt = typeof line.ts === 'number' ? line.ts : typeof line.ts === 'string' ? Date.parse(line.ts) : Number.NaN;
    // Date cannot represent times beyond ±8.64e15 ms; they would break summaries later.
    if (!Number.isFinite(createdAt) || Math.abs(createdAt) > MAX_TIME_MS) {
      throw lineError(lineNumber, `field "ts" must be an ISO 8601 time or epoch milliseconds, got ${JSON.stringify(line.ts)}`);
    }
  }
  return {
    messageId: id as string,
    channelId: line.channel as string,
    authorId: line.author as string,
    authorName: line.author as string,
    role,
    content: line.content,
    createdAt,
  };
}

/**
 * A non-empty string without control characters: ids are matched exactly, so one holding U+0000
 * or a newline is refused here, with its line, rather than stored on one backend and not the
 * other (see common/outside-text.ts). Free text (`content`) is the runtime's to clean.
 */
function requireId(value: unknown, field: string, lineNumber: number): void {
  if (typeof value !== 'string' || value.trim() === '') {
    throw lineError(lineNumber, `field "${field}" must be a non-empty string`);
  }
  const problem = idProblem(value);
  if (problem) throw lineError(lineNumber, `field "${field}" ${problem}`);
}

function lineError(lineNumber: number, problem: string): InputError {
  return new InputError(`transcript line ${lineNumber}: ${problem}`, {
    context: { line: lineNumber },
    hint: 'each line must be a JSON object { "id", "channel", "author", "content", "ts"?, "role"? }',
  });
}
