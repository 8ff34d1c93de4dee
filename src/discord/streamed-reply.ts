import type { ReplyStream } from '../app/channel-responder.js';
import { chunkMessage } from './chunk-message.js';

/** How the parts of a streamed reply reach the platform. */
export interface PartPoster {
  /** Posts a new part (`index` 0 is the first, which replies to the trigger); returns its id. */
  post(content: string, index: number): Promise<string>;
  edit(id: string, content: string): Promise<void>;
  remove(id: string): Promise<void>;
}

/** Time as the streamer sees it; tests pass a virtual one. */
export interface StreamClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export interface StreamedReplyOptions {
  poster: PartPoster;
  /** At most one edit per message per this many ms (Discord rate-limits edits). Default 1000. */
  editIntervalMs?: number;
  /** Splits text into messages; default `chunkMessage` (2,000 characters, fences balanced). */
  chunk?: (text: string) => string[];
  clock?: StreamClock;
  /**
   * Applied to the text before it is chunked (quotes of deleted or edited messages taken out);
   * when what it returns changes, `refresh` brings the screen in line.
   */
  redact?: (text: string) => string;
}

interface Part {
  id: string;
  content: string;
  /** When the last write of this message completed. */
  writtenAt: number;
}

export const DEFAULT_EDIT_INTERVAL_MS = 1000;

const realClock: StreamClock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/**
 * A reply that appears while it is written. Every update re-chunks the whole text so far with
 * the same chunker as a finished reply, so the parts on screen are always a chunking of some
 * prefix, and `finish` makes them exactly the chunking of the final text: new parts are posted,
 * changed ones edited (no message more often than the interval allows), surplus ones removed.
 * All platform calls run one after another; nothing is posted twice.
 */
export class StreamedReply implements ReplyStream {
  private readonly parts: Part[] = [];
  private target = '';
  private finalizing = false;
  private closed = false;
  private pump: Promise<void> | undefined;
  private failure: unknown;
  /** `redact` changed once: parts the text no longer fills may go before the reply is finished. */
  private refreshed = false;
  private readonly interval: number;
  private readonly chunk: (text: string) => string[];
  private readonly clock: StreamClock;

  constructor(private readonly options: StreamedReplyOptions) {
    this.interval = options.editIntervalMs ?? DEFAULT_EDIT_INTERVAL_MS;
    this.chunk = options.chunk ?? ((text) => chunkMessage(text));
    this.clock = options.clock ?? realClock;
  }

  /** Ids of the messages on screen, in order. */
  get messageIds(): string[] {
    return this.parts.map((part) => part.id);
  }

  get firstMessageId(): string | undefined {
    return this.parts[0]?.id;
  }

  /** Whether any part has been posted. */
  get shown(): boolean {
    return this.parts.length > 0;
  }

  update(text: string): void {
    if (this.closed || this.finalizing) return;
    this.target = text;
    this.kick();
  }

  async finish(text: string): Promise<string | undefined> {
    if (this.closed) throw new Error('streamed reply already finished');
    this.finalizing = true;
    this.target = text;
    await this.settle();
    this.closed = true;
    if (this.failure !== undefined) throw this.failure;
    return this.parts[0]?.id;
  }

  async refresh(): Promise<void> {
    this.refreshed = true;
    if (this.failure !== undefined) return;
    if (!this.closed) {
      // Still being written: the pump (or `finish`, which waits for the screen to match) takes it up.
      this.kick();
      await this.pump;
      return;
    }
    // Finished: the parts shown are brought in line with the final text as it reads now.
    if (this.parts.length > 0) await this.settle();
  }

  async fail(note: string): Promise<boolean> {
    if (this.closed) return false;
    // What is on screen may lag what was generated; the note follows all of it.
    if (this.pump) await this.pump.catch(() => {});
    if (this.parts.length === 0 && this.target.trim() === '') {
      this.closed = true;
      return false;
    }
    try {
      await this.finish(`${closeOpenFence(this.target.trimEnd())}\n\n${note}`);
      return true;
    } catch {
      return this.parts.length > 0;
    }
  }

  private kick(): void {
    if (this.pump || this.failure !== undefined) return;
    this.pump = this.run()
      .catch((error: unknown) => {
        this.failure = error;
      })
      .finally(() => {
        this.pump = undefined;
      });
  }

  /** Runs the pump until the screen matches the final text (or a write fails). */
  private async settle(): Promise<void> {
    for (;;) {
      if (this.pump) await this.pump;
      if (this.failure !== undefined || this.inSync()) return;
      this.kick();
    }
  }

  private desired(): string[] {
    const text = this.options.redact ? this.options.redact(this.target) : this.target;
    return text.trim() === '' ? [] : this.chunk(text);
  }

  private inSync(): boolean {
    const desired = this.desired();
    return desired.length === this.parts.length && desired.every((content, index) => this.parts[index]!.content === content);
  }

  private async run(): Promise<void> {
    for (;;) {
      const desired = this.desired();
      const { poster } = this.options;
      if (desired.length > this.parts.length) {
        // A new part goes up at once: it is a new message, not an edit.
        const index = this.parts.length;
        const content = desired[index]!;
        const id = await poster.post(content, index);
        this.parts.push({ id, content, writtenAt: this.clock.now() });
        continue;
      }
      if ((this.finalizing || this.refreshed) && this.parts.length > desired.length) {
        // The final text (or the text without a deleted quote) needs fewer messages than were
        // shown (a removal is not an edit).
        const surplus = this.parts[this.parts.length - 1]!;
        await poster.remove(surplus.id);
        this.parts.pop();
        continue;
      }
      const stale: number[] = [];
      for (let index = 0; index < Math.min(this.parts.length, desired.length); index += 1) {
        if (this.parts[index]!.content !== desired[index]) stale.push(index);
      }
      if (stale.length === 0) return;
      // The part that may be written soonest goes first.
      stale.sort((a, b) => this.parts[a]!.writtenAt - this.parts[b]!.writtenAt);
      const index = stale[0]!;
      const part = this.parts[index]!;
      const wait = part.writtenAt + this.interval - this.clock.now();
      if (wait > 0) {
        await this.clock.sleep(wait);
        continue;
      }
      const content = desired[index]!;
      await poster.edit(part.id, content);
      part.content = content;
      part.writtenAt = this.clock.now();
    }
  }
}

/** Closes a code fence the text leaves open, so that a note after it is not shown as code. */
export function closeOpenFence(text: string): string {
  let open = false;
  for (const line of text.split('\n')) {
    if ((line.split('```').length - 1) % 2 === 1) open = !open;
  }
  return open ? `${text}\n\`\`\`` : text;
}
