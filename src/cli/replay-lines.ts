import type { ChannelRuntime } from '../channel/runtime.js';
import type { IncomingMessage } from '../context/types.js';
import type { Clock } from '../common/clock.js';
import type { InputError } from '../common/errors.js';
import { parseTranscriptLine } from '../compaction/transcript-line.js';
import { normalizeIncoming } from '../channel/incoming-message.js';

/** The replay clock's time before the first line (only read if something runs before it). */
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
  /** Lines read (blank ones included), up to where the replay stopped. */
  lines: number;
  /** `shouldStop` said so (a signal): the lines after `lines` were not read. */
  stopped?: boolean;
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
  /** The time of a channel's newest stored message (lines without `ts` come after it). */
  lastStoredTime?: (channelId: string) => Promise<number | undefined>;
  /** Where lines without `ts` start when nothing earlier gives a time; default: now. */
  startTime?: number;
  /** Runs before each message is ingested, the clock already at its time (pricing the bot's replies). */
  beforeIngest?: (message: IncomingMessage) => Promise<void>;
  /** Asked before each line: true stops the replay there (the message before it is complete). */
  shouldStop?: () => boolean;
  /** Called after each line with the running counts and the raw line (for progress display). */
  onLine?: (progress: ReplayProgress, raw: string) => void;
}): Promise<ReplayProgress> {
  const progress: ReplayProgress = { messages: 0, duplicates: 0, conflicts: 0, channels: new Set(), lines: 0 };
  const times = new UndatedTimes(options.lastStoredTime, options.startTime ?? Date.now());
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
      if (options.shouldStop?.()) {
        progress.stopped = true;
        break;
      }
      lineNumber += 1;
      progress.lines = lineNumber;
      // Editors on Windows start files with a byte-order mark, which JSON does not allow.
      const text = lineNumber === 1 && raw.startsWith('\uFEFF') ? raw.slice(1) : raw;
      if (text.trim() === '') {
        options.onLine?.(progress, raw);
        continue;
      }
      let message;
      try {
        // As the runtime will store it (U+0000 replaced), so a re-run finds its own text again
        // and counts a duplicate, not a conflict.
        message = normalizeIncoming(parseTranscriptLine(text, lineNumber, Number.NaN));
      } catch (error) {
        progress.error = error as InputError;
        break;
      }
      let stored;
      let added: boolean;
      // Every read and write of the store here: a failure of any (a read that timed out as much
      // as a write) ends the replay with its summary and how to go on.
      try {
        if (Number.isNaN(message.createdAt)) message.createdAt = await times.next(message.channelId);
        else times.seen(message.createdAt);
        options.clock.current = message.createdAt;
        progress.channels.add(message.channelId);
        const before = (await options.runtime.status(message.channelId)).archivedMessages;
        await options.beforeIngest?.(message);
        stored = await options.runtime.ingest(message);
        added = (await options.runtime.status(message.channelId)).archivedMessages > before;
      } catch (error) {
        progress.failure = error;
        break;
      }
      if (added) progress.messages += 1;
      else if (stored.content !== message.content || stored.authorId !== message.authorId) {
        progress.conflicts += 1;
        options.onConflict?.({ line: lineNumber, channelId: message.channelId, messageId: message.messageId });
      } else progress.duplicates += 1;
      options.onLine?.(progress, raw);
    }
  }
}

/**
 * Times for lines without `ts`: in file order, one millisecond apart, after both the previous
 * line and the channel's newest stored message (so a second transcript continues the first).
 */
class UndatedTimes {
  private previous: number | undefined;
  private readonly checked = new Set<string>();

  constructor(
    private readonly lastStoredTime: ((channelId: string) => Promise<number | undefined>) | undefined,
    private readonly startTime: number,
  ) {}

  seen(time: number): void {
    this.previous = time;
  }

  async next(channelId: string): Promise<number> {
    let after = this.previous;
    if (!this.checked.has(channelId)) {
      this.checked.add(channelId);
      const stored = await this.lastStoredTime?.(channelId);
      if (stored !== undefined && (after === undefined || stored > after)) after = stored;
    }
    this.previous = after === undefined ? this.startTime : after + 1;
    return this.previous;
  }
}
