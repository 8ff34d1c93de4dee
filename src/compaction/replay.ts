import type { ChannelRuntime } from '../channel/runtime.js';
import type { Clock } from '../common/clock.js';
import type { InputError } from '../common/errors.js';
import { parseTranscriptLine } from './transcript-line.js';

/** Transcript lines without `ts` count on from here (2020-01-01, UTC). */
const DEFAULT_START_TIME = Date.UTC(2020, 0, 1);

/**
 * Replay's clock: the time of the transcript line being replayed, so summaries and markers carry
 * the conversation's own times and two runs write the same rows.
 */
export class TranscriptClock implements Clock {
  current = DEFAULT_START_TIME;
  now(): number {
    return this.current;
  }
}

export interface ReplayProgress {
  /** Lines ingested as new messages. */
  messages: number;
  /** Lines whose message id the channel already had (a re-run): skipped. */
  duplicates: number;
  channels: Set<string>;
  /** Lines that reused a stored id with other text: reported, the stored text kept. */
  conflicts: number;
  /** The first bad line, which stopped the replay; everything before it is kept. */
  error?: InputError;
  /** A failure to store (full disk, I/O error): stopped the replay; everything counted is stored. */
  failure?: unknown;
}

/** A line whose id the channel already holds with other text. */
export interface ReplayConflict {
  line: number;
  channelId: string;
  messageId: string;
}

/**
 * Feeds transcript lines, as they stream in, through the same `ChannelRuntime.ingest` the bot
 * uses. Stops at the first bad line (so a truncated or garbled file is noticed), keeping what
 * was already ingested.
 */
export async function replayLines(options: {
  lines: AsyncIterable<string>;
  runtime: ChannelRuntime;
  clock: TranscriptClock;
  /** Told about each reused id with other text (the CLI reports it on stderr). */
  onConflict?: (conflict: ReplayConflict) => void;
}): Promise<ReplayProgress> {
  const progress: ReplayProgress = { messages: 0, duplicates: 0, conflicts: 0, channels: new Set() };
  let lineNumber = 0;
  try {
    await feed();
  } catch (error) {
    // Reading the file failed (a line that is not UTF-8): the same as a bad line.
    if ((error as { code?: string }).code === 'bad_input') progress.error = error as InputError;
    else throw error;
  }
  return progress;

  async function feed(): Promise<void> {
    for await (const raw of options.lines) {
      lineNumber += 1;
      // Editors on Windows start files with a byte-order mark, which JSON does not allow.
      const text = lineNumber === 1 && raw.startsWith('\uFEFF') ? raw.slice(1) : raw;
      if (text.trim() === '') continue;
      let message;
      try {
        message = parseTranscriptLine(text, lineNumber, options.clock.current);
      } catch (error) {
        progress.error = error as InputError;
        break;
      }
      options.clock.current = message.createdAt;
      progress.channels.add(message.channelId);
      const before = options.runtime.status(message.channelId).archivedMessages;
      let stored;
      try {
        stored = await options.runtime.ingest(message);
      } catch (error) {
        progress.failure = error;
        break;
      }
      if (options.runtime.status(message.channelId).archivedMessages > before) progress.messages += 1;
      else if (stored.content !== message.content || stored.authorId !== message.authorId) {
        progress.conflicts += 1;
        options.onConflict?.({ line: lineNumber, channelId: message.channelId, messageId: message.messageId });
      } else progress.duplicates += 1;
    }
  }
}
