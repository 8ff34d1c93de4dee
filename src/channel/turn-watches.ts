import { redactQuotes, type QuoteIndex } from '../privacy/quoted-spans.js';
import type { RedactionTarget } from '../privacy/redact.js';
import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { ownReplyQuotes, removalTarget, type RemovedMessage } from './privacy-propagator.js';

/** One of the bot's own replies lost the quote of a deleted or edited message. */
export interface RedactedReply {
  channelId: string;
  /** The platform id of the reply (its first part, when it was sent in several). */
  messageId: string;
  before: string;
  after: string;
}

/** A delete or an edit of a message that reached its channel while a turn there was running. */
export interface LateChange {
  mode: 'delete' | 'edit';
  removed: readonly RemovedMessage[];
  /** For an edit: the messages as history holds them now (their new text). */
  edited: readonly HistoryEntry[];
  /** What a reply loses: stretches quoting the old text (undefined when none is long enough to quote). */
  quotes: QuoteIndex | undefined;
  /**
   * What tool rows and worker tasks lose; once the change's own propagation has run, its target
   * (which also holds the words of memories drawn from the message).
   */
  target: RedactionTarget;
  /**
   * Once the change's own propagation has run: the summaries it changed (a marker, a rewrite,
   * or retired, `live: false`). Until then a summary covering the message is withheld.
   */
  summaries?: ReadonlyArray<SummaryEntry & { live: boolean }>;
}

/**
 * A running turn's view of the deletes and edits of its channel. The turn's answer was written
 * from text that may be gone by the time it is posted or recorded: through this watch it is
 * treated as a stored reply would be when the change arrives, whenever that is.
 */
export interface TurnWatch {
  /** `text` without the quotes of every change so far, as a stored reply loses them. */
  redact(text: string): string;
  /** Every change so far, in the order they came. */
  changes(): readonly LateChange[];
  /** Called after each change (what `redact` returns may differ). */
  onChange(listener: () => void): void;
  /**
   * The reply is posted under `messageId`: until `close`, updating that copy is this turn's job
   * (a stored reply's propagation leaves it alone). With `text`, what was posted, which `close`
   * has edited (through the runtime's reply listeners) when a change took a quote out of it;
   * without, the caller updates it itself (a streamed reply, through `redact`).
   */
  posted(messageId: string, text?: string): void;
  /**
   * Once what the turn adds is recorded: its reply, notes, tool rows and worker tasks lose the
   * quotes of the changes so far, in history, the live context and the archive. Resolves when
   * that is done (the next request then holds none of it).
   */
  settle(): Promise<void>;
  /**
   * Ends the watch: the posted reply follows every change until none came since it was last
   * updated (`show` updates a reply the caller shows itself), then changes reach it as they
   * reach any stored reply.
   */
  close(show?: () => Promise<void>): Promise<void>;
}

/** What the watches ask of the runtime. */
export interface TurnWatchHost {
  /** Takes the changes out of what the channel recorded (see `TurnWatch.settle`); true when something changed. */
  redactLate(channelId: string, changes: readonly LateChange[]): Promise<boolean>;
  /** The platform edits a posted reply. */
  replyRedacted(reply: RedactedReply): void;
  /** Old text was overwritten: what the database keeps beside its rows is cleared. */
  clearTraces(channelId: string): Promise<void>;
}

/** The turns running in each channel, and the changes that reached them. */
export class TurnWatches {
  private readonly open = new Map<string, Set<ChannelTurnWatch>>();

  constructor(private readonly host: TurnWatchHost) {}

  /** Starts watching for a turn of the channel (before it builds its first request). */
  watch(channelId: string): TurnWatch {
    const watch = new ChannelTurnWatch(channelId, this.host, () => {
      const watches = this.open.get(channelId);
      watches?.delete(watch);
      if (watches?.size === 0) this.open.delete(channelId);
    });
    let watches = this.open.get(channelId);
    if (!watches) this.open.set(channelId, (watches = new Set()));
    watches.add(watch);
    return watch;
  }

  /**
   * Messages of the channel were deleted (or edited: `removed` holds their old text): every
   * turn running there follows. Called before the change's propagation is queued; returns the
   * record whose target the propagation completes (undefined when no turn runs).
   */
  changed(channelId: string, removed: readonly RemovedMessage[], mode: 'delete' | 'edit', edited: readonly HistoryEntry[] = []): LateChange | undefined {
    const watches = this.open.get(channelId);
    if (!watches || removed.length === 0) return undefined;
    const change: LateChange = { mode, removed, edited, quotes: ownReplyQuotes(removed), target: removalTarget(removed, mode) };
    for (const watch of watches) watch.add(change);
    return change;
  }

  /** Whether a running turn updates this reply's platform copy itself. */
  claims(channelId: string, messageId: string): boolean {
    for (const watch of this.open.get(channelId) ?? []) if (watch.claims(messageId)) return true;
    return false;
  }
}

class ChannelTurnWatch implements TurnWatch {
  private readonly seen: LateChange[] = [];
  private readonly listeners: Array<() => void> = [];
  private readonly claimed = new Set<string>();
  /** A reply posted whole, which `close` edits: what was posted, and what it reads now. */
  private reply: { messageId: string; text: string; shown: string } | undefined;
  /** Changes already taken out of the history (`settle`) and out of the posted reply (`close`). */
  private settledCount = 0;
  private shownCount = 0;
  private redactedHistory = false;

  constructor(
    private readonly channelId: string,
    private readonly host: TurnWatchHost,
    private readonly end: () => void,
  ) {}

  add(change: LateChange): void {
    this.seen.push(change);
    for (const listener of this.listeners) {
      try {
        listener();
      } catch {
        // A listener only updates what is shown; the change stands.
      }
    }
  }

  claims(messageId: string): boolean {
    return this.claimed.has(messageId);
  }

  redact(text: string): string {
    for (const change of this.seen) if (change.quotes) text = redactQuotes(text, change.quotes, change.target.note);
    return text;
  }

  changes(): readonly LateChange[] {
    return this.seen;
  }

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  posted(messageId: string, text?: string): void {
    this.claimed.add(messageId);
    if (text !== undefined) this.reply = { messageId, text, shown: text };
  }

  async settle(): Promise<void> {
    // Taken now: a change that comes later is queued behind this and finds the turn's rows itself.
    const late = this.seen.slice(this.settledCount);
    this.settledCount = this.seen.length;
    if (late.length > 0 && (await this.host.redactLate(this.channelId, late))) this.redactedHistory = true;
  }

  async close(show?: () => Promise<void>): Promise<void> {
    try {
      while (this.shownCount < this.seen.length) {
        this.shownCount = this.seen.length;
        const reply = this.reply;
        if (reply) {
          const after = this.redact(reply.text);
          if (after !== reply.shown) {
            this.host.replyRedacted({ channelId: this.channelId, messageId: reply.messageId, before: reply.shown, after });
            reply.shown = after;
          }
        }
        if (show) await show();
      }
    } finally {
      // In the same step as the last check: a change that comes after it is a stored reply's.
      this.end();
    }
    if (this.redactedHistory) await this.host.clearTraces(this.channelId);
  }
}
