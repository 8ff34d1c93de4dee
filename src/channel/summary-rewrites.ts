import { toEntry, toSummary, type EntryRow, type SummaryRow as BaseSummaryRow } from './history-store.js';
import { estimateSummaryTokens } from '../context/summary-text.js';
import type { SummaryEntry } from '../context/types.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import { extractiveSummary } from '../compaction/extractive-summarizer.js';
import type { Summarizer } from '../compaction/summarizer.js';
import type { CompactionSettings } from '../config/types.js';
import type { MemoryLocation } from '../memory/types.js';
import type { SqlClient, SqlQuery } from '../storage/sql-client.js';


/**
 * The messages a summary stands for, to write it again from: those in its seq range whose turn
 * ends inside it. A cut through overlapping turns holds back a message whose reply lies past the
 * cut (see the compaction planner): it is in the range but was not summarized (it stayed live, or
 * a later summary took it). Parameters: channel id, from_seq, to_seq, to_seq.
 */
export const SUMMARIZED_MESSAGES = `SELECT * FROM history_entries e
  WHERE e.channel_id = ? AND e.seq BETWEEN ? AND ? AND e.kind = 'message'
    AND NOT EXISTS (SELECT 1 FROM history_entries later WHERE later.channel_id = e.channel_id AND later.turn_id = e.turn_id AND later.seq > ?)
  ORDER BY e.seq`;

export interface SummaryRewriteOptions {
  db: SqlClient;
  events: EventStream;
  /** Writes rewritten summaries of model-written ones (the channel's summarizer). */
  summarizer: Summarizer;
  /** Used at once for extractive summaries, and when the model fails a rewrite. */
  fallbackSettings(channelId: string): CompactionSettings;
  /** Where the channel's memories belong (for memories saved during a model rewrite). */
  locationOf(channelId: string): MemoryLocation;
  /** A rewrite landed (or a summary changed later): the runtime updates its live context. */
  onSummaryChanged(summary: SummaryEntry & { live: boolean }): void;
}

/** The summary columns the propagator also reads. */
export interface SummaryRow extends BaseSummaryRow {
  live: number;
  summarizer: string | null;
  needs_rewrite: number;
  /** What the summary cost before it became a marker waiting for its rewrite (null: an older row). */
  rewrite_tokens: number | null;
}

/**
 * The most a rewrite of `row` may cost, as a summary entry (its heading included): what the
 * summary cost before. Undefined for a marker made before that was recorded.
 */
export function rewriteRoom(row: SummaryRow): number | undefined {
  return (row.kind === 'summary' ? row.tokens : row.rewrite_tokens) ?? undefined;
}

/** `rewriteRoom` as the bound of the text alone (`maxSummaryTokens`), with a token of slack for rounding. */
export function rewriteTextRoom(row: SummaryRow, room: number): number {
  const heading = estimateSummaryTokens({ kind: 'summary', fromSeq: row.from_seq, toSeq: row.to_seq, content: '' });
  return Math.max(1, room - heading - 1);
}

/** What a retired summary that covered a removed message keeps: nothing of its words. */
export const RETIRED_PLACEHOLDER = '(removed: this summary covered a deleted message)';

/**
 * A model cannot write to a token count: its rewrite may cost a quarter more than the summary
 * did (what compaction then handles as any growth). The extractive summarizer is held to it.
 */
const MODEL_REWRITE_SLACK = 1.25;

/** Ranges larger than this (estimated tokens) are rewritten by the extractive summarizer. */
const MAX_MODEL_REWRITE_TOKENS = 60_000;

/**
 * Model rewrites of summaries that covered a removed message (turned into markers meanwhile),
 * in the background, one at a time per summary. A rewrite lands only onto the summary as it
 * was when it started: a later removal in its range (`touch`) makes it start over.
 */
export class SummaryRewrites {
  /** Bumped whenever a summary is touched, so a rewrite started before lands only if still current. */
  private readonly generations = new Map<number, number>();
  private readonly running = new Map<number, Promise<void>>();
  private readonly abort = new AbortController();
  private readonly summary: SqlQuery;
  private readonly rangeMessages: SqlQuery;
  private readonly updateSummary: SqlQuery;

  constructor(private readonly options: SummaryRewriteOptions) {
    const { db } = options;
    this.summary = db.prepare('SELECT * FROM history_summaries WHERE id = ?');
    this.rangeMessages = db.prepare(SUMMARIZED_MESSAGES);
    this.updateSummary = db.prepare('UPDATE history_summaries SET kind = ?, content = ?, tokens = ?, needs_rewrite = ?, live = ? WHERE id = ?');
  }

  /** Summary `id` changed: a rewrite in flight for it will not land. */
  touch(id: number): void {
    this.generations.set(id, (this.generations.get(id) ?? 0) + 1);
  }

  /** Resolves when no rewrite is running. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** Stops model rewrites; the summaries stay markers and are rewritten at the next start. */
  async close(): Promise<void> {
    this.abort.abort(new Error('shutting down'));
    await Promise.allSettled([...this.running.values()]);
  }

  /** Starts rewriting summary `id` (once at a time per summary). */
  start(id: number): void {
    if (this.running.has(id) || this.abort.signal.aborted) return;
    const work = this.rewrite(id).then(
      (superseded) => {
        this.running.delete(id);
        // Another delete in the range meanwhile: write it again from what remains now.
        if (superseded) this.start(id);
      },
      () => {
        this.running.delete(id);
      },
    );
    this.running.set(id, work);
  }

  /**
   * A worker writes the summary again from the archive, which no longer holds the message.
   * Returns true when the summary changed meanwhile and must be rewritten again.
   */
  private async rewrite(id: number): Promise<boolean> {
    const generation = this.generations.get(id) ?? 0;
    const row = (await this.summary.get(id)) as SummaryRow | undefined;
    if (!row || row.live === 0 || row.needs_rewrite === 0) return false;
    const entries = ((await this.rangeMessages.all(row.channel_id, row.from_seq, row.to_seq, row.to_seq)) as EntryRow[]).map(toEntry);
    const settings = this.options.fallbackSettings(row.channel_id);
    const room = rewriteRoom(row);
    let content = '';
    let summarizer = this.options.summarizer.name;
    let rangeTokens = 0;
    for (const entry of entries) rangeTokens += entry.tokens;
    try {
      // A roll-up can span a channel's whole past: more than a model request holds goes extractive.
      if (entries.length > 0 && rangeTokens <= MAX_MODEL_REWRITE_TOKENS) {
        const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(settings.workerTimeoutMs)]);
        // A summarizer that ignores the signal still loses the race against it.
        const result = await Promise.race([
          this.options.summarizer.summarize({
            channelId: row.channel_id,
            location: this.options.locationOf(row.channel_id),
            priorSummaries: [],
            entries,
            settings,
            ...(room !== undefined ? { maxSummaryTokens: rewriteTextRoom(row, room) } : {}),
            signal,
          }),
          new Promise<never>((_, reject) => {
            if (signal.aborted) reject(signal.reason);
            signal.addEventListener('abort', () => reject(signal.reason), { once: true });
          }),
        ]);
        content = typeof result.summary === 'string' ? result.summary.trim() : '';
        // Much longer than the summary it stands in for: written extractively within that instead.
        const draft = { kind: 'summary' as const, fromSeq: row.from_seq, toSeq: row.to_seq, content };
        if (room !== undefined && estimateSummaryTokens(draft) > room * MODEL_REWRITE_SLACK) content = '';
      }
    } catch (error) {
      if (this.abort.signal.aborted) return false;
      this.options.events.emit({ type: 'summary_rewrite_failed', channel_id: row.channel_id, summary_id: id, error: errorMessage(error) });
    }
    if (content === '' && entries.length > 0) {
      content = extractiveSummary({ entries, priorSummaries: [], settings, ...(room !== undefined ? { maxSummaryTokens: rewriteTextRoom(row, room) } : {}) });
      summarizer = 'extractive';
    }
    // Only onto the summary as it was: another delete or a roll-up meanwhile starts over or wins.
    // Read and written in one transaction: nothing lands between the check and the write.
    const landed = await this.options.db.transaction(async (): Promise<(SummaryEntry & { live: boolean }) | 'superseded' | undefined> => {
      const now = (await this.summary.get(id)) as SummaryRow | undefined;
      if (!now || now.live === 0 || now.needs_rewrite === 0) return undefined;
      if ((this.generations.get(id) ?? 0) !== generation || now.from_seq !== row.from_seq || now.to_seq !== row.to_seq) return 'superseded';
      if (content === '') {
        await this.updateSummary.run(now.kind, RETIRED_PLACEHOLDER, now.tokens, 0, 0, id);
        return { ...toSummary(now), content: RETIRED_PLACEHOLDER, live: false };
      }
      const draft = { kind: 'summary' as const, fromSeq: now.from_seq, toSeq: now.to_seq, content };
      const tokens = estimateSummaryTokens(draft);
      await this.options.db
        // Written from every message of its range: a roll-up's folded markers too.
        .prepare('UPDATE history_summaries SET kind = ?, content = ?, tokens = ?, needs_rewrite = 0, summarizer = ?, read_from_seq = from_seq WHERE id = ?')
        .run('summary', content, tokens, summarizer, id);
      return { ...toSummary(now), ...draft, tokens, live: true };
    });
    if (landed === undefined) return false;
    if (landed === 'superseded') return true;
    const changed = landed;
    this.options.events.emit({ type: 'summary_rewritten', channel_id: changed.channelId, summary_id: id, summarizer, messages: entries.length });
    this.options.onSummaryChanged(changed);
    return false;
  }
}
