import type { IncomingMessage } from '../context/types.js';
import { InputError } from '../common/errors.js';
import { idProblem } from '../common/outside-text.js';

/** The largest time a JavaScript Date can hold, in milliseconds either side of the epoch. */
const MAX_TIME_MS = 8.64e15;

/**
 * One line of a replay transcript: `{ "id", "channel", "author", "content", "ts"?, "role"? }`.
 * `ts` is an ISO 8601 time with its zone (`Z` or `±hh:mm`), a date alone (UTC midnight), or
 * milliseconds since the epoch; `role` is "user" (default) or "assistant".
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
  const id = typeof line.id === 'number' ? numericId(line.id, lineNumber) : line.id;
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
    createdAt = typeof line.ts === 'number' ? line.ts : typeof line.ts === 'string' ? parseIsoTime(line.ts) : Number.NaN;
    // Date cannot represent times beyond ±8.64e15 ms; they would break summaries later.
    if (!Number.isFinite(createdAt) || Math.abs(createdAt) > MAX_TIME_MS) {
      throw lineError(
        lineNumber,
        `field "ts" must be an ISO 8601 time with its zone ("2024-03-25T14:02:11Z", "…+01:00"), a date ("2024-03-25"), or epoch milliseconds, got ${JSON.stringify(line.ts)}`,
      );
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
 * A number as an id, as text. JSON numbers past 2^53 reach JavaScript already rounded (two
 * neighbouring Discord snowflakes become the same number), so such an id is refused rather than
 * stored as another message's id.
 */
function numericId(value: number, lineNumber: number): string {
  if (Number.isSafeInteger(value)) return String(value);
  throw lineError(
    lineNumber,
    `field "id" is a number past 2^53 or not whole (read as ${value}), which JSON readers round; write the id as a string, in quotes`,
  );
}

// An ISO 8601 date, optionally with a time that then carries its zone: "2024-03-25",
// "2024-03-25T14:02:11Z", "2024-03-25T14:02:11.337000+01:00" (Discord's form).
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2}))?$/;

/**
 * Milliseconds since the epoch of a strict ISO 8601 time, or NaN. `Date.parse` takes much more
 * ("March 7, 2024", "12") and reads a time without a zone in the machine's zone, so the same
 * transcript would land at other times on another machine.
 */
function parseIsoTime(text: string): number {
  const match = ISO_TIME.exec(text);
  if (!match) return Number.NaN;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map((part) => Number(part ?? 0)) as [number, number, number, number, number, number];
  // Digits past the millisecond are dropped (Discord gives microseconds).
  const milliseconds = Number(`${match[7] ?? ''}000`.slice(0, 3));
  if (hour > 23 || minute > 59 || second > 59) return Number.NaN;
  let offsetMinutes = 0;
  const zone = match[8];
  if (zone !== undefined && zone !== 'Z') {
    const [zoneHours, zoneMinutes] = [Number(zone.slice(1, 3)), Number(zone.slice(4, 6))];
    if (zoneHours > 23 || zoneMinutes > 59) return Number.NaN;
    offsetMinutes = (zone.startsWith('-') ? -1 : 1) * (zoneHours * 60 + zoneMinutes);
  }
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  date.setUTCFullYear(year, month - 1, day);
  // A day the month does not have (2023-02-29) rolls over into the next: not a date.
  if (date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return Number.NaN;
  date.setUTCHours(hour, minute, second, milliseconds);
  return date.getTime() - offsetMinutes * 60_000;
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
