import type { Clock } from '../common/clock.js';
import { toEntry, toSummary, type EntryRow } from './history-store.js';
import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { estimateSummaryTokens } from '../context/summary-text.js';
import { estimateEntryTokens } from '../context/token-estimate.js';
import { markerText } from '../compaction/emergency.js';
import { extractiveSummary } from '../compaction/extractive-summarizer.js';
import type { MemoryStore } from '../memory/types.js';
import { MIN_QUOTE_LENGTH, quoteIndex, redactQuotes, type QuoteIndex } from '../privacy/quoted-spans.js';
import { DELETED_NOTE, EDITED_NOTE, redactionTarget, redactToolBlock, replaceTexts, type RedactionTarget } from '../privacy/redact.js';
import { KeyedRead } from '../storage/keyed-read.js';
import { MemoryRewrites } from './memory-rewrites.js';
import { RETIRED_PLACEHOLDER, rewriteRoom, rewriteTextRoom, SUMMARIZED_MESSAGES, SummaryRewrites, type SummaryRewriteOptions, type SummaryRow } from './summary-rewrites.js';

/** A message whose words must leave every copy: deleted, edited (its old text), erased. */
export interface RemovedMessage {
  seq: number;
  messageId: string;
  authorName: string;
  /** The text that must go (for an edit: the text before it). */
  content: string;
}

/** What changed in the database, for the runtime to mirror in the live contexts it holds. */
export interface PropagationChanges {
  /** Tool calls and results whose quoted text was replaced (any channel). */
  entries: HistoryEntry[];
  /** The bot's own replies in the channel that quoted the text, as they read now (before: `quoted`). */
  replies: Array<{ entry: HistoryEntry; before: string }>;
  /** Summaries of the channel that changed: turned into markers, rewritten, or retired (`live: false`). */
  summaries: Array<SummaryEntry & { live: boolean }>;
  counts: { toolEntries: number; summaries: number; memoriesDeleted: number; memoriesUpdated: number; workerTasks: number; replies: number };
  /** What was taken out of tool rows and worker tasks (absent when nothing was removed). */
  target?: RedactionTarget;
}

export interface PrivacyPropagatorOptions extends SummaryRewriteOptions {
  memory: MemoryStore;
  clock: Clock;
}

/**
 * Deleted means gone: once messages leave history (or change), this takes their words out of
 * every other place they were copied to — tool results kept in any channel's history, the
 * summaries that covered them, memories drawn from them — and rewrites those summaries
 * without them. Runs against the database only; the runtime mirrors the returned changes once
 * they have committed.
 */
export class PrivacyPropagator {
  private readonly statements;
  private readonly rewrites: SummaryRewrites;
  private readonly memoryRewrites: MemoryRewrites;

  constructor(private readonly options: PrivacyPropagatorOptions) {
    const { db } = options;
    this.rewrites = new SummaryRewrites(options);
    this.memoryRewrites = new MemoryRewrites(options);
    this.statements = {
      toolRows: db.prepare(`SELECT * FROM history_entries WHERE kind IN ('tool_call', 'tool_result')`),
      updateEntry: db.prepare('UPDATE history_entries SET content = ?, tokens = ? WHERE channel_id = ? AND seq = ?'),
      updateTask: db.prepare('UPDATE worker_tasks SET task = ? WHERE id = ?'),
      tasks: db.prepare('SELECT id, task FROM worker_tasks'),
      repliesAfter: db.prepare(
        `SELECT * FROM history_entries WHERE channel_id = ? AND seq > ? AND kind = 'message' AND role = 'assistant' ORDER BY seq`,
      ),
      channelToolRows: db.prepare(`SELECT * FROM history_entries WHERE channel_id = ? AND kind IN ('tool_call', 'tool_result')`),
      covering: db.prepare('SELECT * FROM history_summaries WHERE channel_id = ? AND from_seq <= ? AND to_seq >= ?'),
      updateSummary: db.prepare(
        'UPDATE history_summaries SET kind = ?, content = ?, tokens = ?, needs_rewrite = ?, live = ? WHERE id = ?',
      ),
      rewriteTokens: db.prepare('UPDATE history_summaries SET rewrite_tokens = ? WHERE id = ?'),
      readAll: db.prepare('UPDATE history_summaries SET read_from_seq = from_seq WHERE id = ?'),
      pending: new KeyedRead(db, 'SELECT id FROM history_summaries WHERE channel_id = @key AND live = 1 AND needs_rewrite = 1'),
      tombstone: db.prepare('INSERT OR REPLACE INTO deleted_messages (channel_id, message_id, deleted_at) VALUES (?, ?, ?)'),
      pruneTombstones: db.prepare('DELETE FROM deleted_messages WHERE deleted_at < ?'),
      rangeMessages: db.prepare(SUMMARIZED_MESSAGES),
    };
  }

  /**
   * Propagates the removal of `removed` (already gone from, or changed in, history and the
   * transcript index). `mode` picks the note that stands in for quoted text.
   */
  async propagate(channelId: string, removed: readonly RemovedMessage[], mode: 'delete' | 'edit'): Promise<PropagationChanges> {
    const changes: PropagationChanges = {
      entries: [],
      replies: [],
      summaries: [],
      counts: { toolEntries: 0, summaries: 0, memoriesDeleted: 0, memoriesUpdated: 0, workerTasks: 0, replies: 0 },
    };
    if (removed.length === 0) return changes;
    if (mode === 'delete') {
      // Ids only, for a day: a worker that read the message before it was deleted cannot save from it.
      const now = this.options.clock.now();
      await this.options.db.transaction(async () => {
        for (const message of removed) await this.statements.tombstone.run(channelId, message.messageId, now);
        await this.statements.pruneTombstones.run(now - TOMBSTONE_MS);
      });
    }
    const quotes = quoteIndex(removed.map((message) => message.content).filter((content) => content !== ''));
    const redact = (text: string): string => redactQuotes(text, quotes, DELETED_NOTE);
    const rewrite = this.memoryRewrites.available;
    const { dropped, toRewrite } = await this.memoryRewrites.during(channelId, async () => {
      const result = (await this.options.memory.dropSources?.(channelId, removed.map((message) => message.messageId), { rewrite })) ?? {
        deleted: [],
        rewriting: [],
      };
      const target = removalTarget(removed, mode, [
        // A memory drawn from the message, deleted or waiting for its rewrite: its old words go too.
        ...result.deleted.map((memory) => memory.content),
        ...result.rewriting.flatMap((memory) => (memory.content === undefined ? [] : [memory.content])),
      ]);
      changes.target = target;
      const summariesToRewrite = await this.options.db.transaction(async () => {
        changes.entries = await this.redactToolRows(target, channelId);
        changes.replies = await this.redactOwnReplies(channelId, removed, target.note);
        changes.counts.workerTasks = await this.redactWorkerTasks(target);
        const retired = await this.retireCoveringSummaries(channelId, removed);
        changes.summaries = retired.changed;
        return retired.toRewrite;
      });
      // Only now: a restatement reads the messages the memory still rests on, the bot's replies
      // among them, which quoted the removed message until the transaction above. What the
      // memory itself quoted never reaches the model either.
      this.memoryRewrites.start(result.rewriting, redact);
      return { dropped: result, toRewrite: summariesToRewrite };
    });
    changes.counts.memoriesDeleted = dropped.deleted.length;
    changes.counts.memoriesUpdated = dropped.rewriting.length;
    const unrestated = dropped.deleted.filter((memory) => memory.sourcesLeft > 0).length;
    if (unrestated > 0) {
      // No model to restate them: deleted rather than kept with what they drew from the message.
      this.options.events.emit({ type: 'memory_rewrite_dropped', channel_id: channelId, reason: 'no_model', memories: unrestated });
    }
    // After the transaction that made them markers: a rewrite reads the committed rows.
    for (const id of toRewrite) this.rewrites.start(id);
    changes.counts.toolEntries = changes.entries.length;
    changes.counts.replies = changes.replies.length;
    changes.counts.summaries = changes.summaries.length;
    return changes;
  }

  /**
   * What a turn recorded after changes that reached it while it ran (`ChannelTurnWatch`): its
   * reply and notes, tool calls and results, and any worker it started lose the quotes of each
   * change, in order, exactly as the propagation of that change does for a reply already stored.
   * Tombstones, memories and summaries are the propagation's own, done once. Returns the rows
   * that changed, each reply with the text it had before the first change.
   */
  redactLate(
    channelId: string,
    late: ReadonlyArray<{ removed: readonly RemovedMessage[]; target: RedactionTarget }>,
  ): Promise<Pick<PropagationChanges, 'entries' | 'replies'>> {
    return this.options.db.transaction(async () => {
      const entries = new Map<string, HistoryEntry>();
      const replies = new Map<number, { entry: HistoryEntry; before: string }>();
      for (const { removed, target } of late) {
        for (const entry of await this.redactToolRows(target, channelId)) entries.set(`${entry.channelId}|${entry.seq}`, entry);
        for (const reply of await this.redactOwnReplies(channelId, removed, target.note)) {
          replies.set(reply.entry.seq, { entry: reply.entry, before: replies.get(reply.entry.seq)?.before ?? reply.before });
        }
        await this.redactWorkerTasks(target);
      }
      return { entries: [...entries.values()], replies: [...replies.values()] };
    });
  }

  /** A forgotten memory's text leaves the tool results (and worker tasks) that quoted it. */
  redactTexts(texts: readonly string[]): Promise<HistoryEntry[]> {
    const target = redactionTarget({ messageIds: [], texts, note: DELETED_NOTE });
    return this.options.db.transaction(async () => {
      await this.redactWorkerTasks(target);
      return this.redactToolRows(target);
    });
  }

  /**
   * Rewrites every summary of the channel still waiting for one (after a restart, too); deletes
   * its memories left waiting by an earlier run (their old text, needed to restate them, is gone).
   */
  async resume(channelId: string): Promise<void> {
    for (const row of (await this.statements.pending.rows(channelId)) as Array<{ id: number }>) this.rewrites.start(row.id);
    await this.memoryRewrites.resume(channelId);
  }

  /** Resolves when no rewrite (of a summary or a memory) is running (tests, the CLI before it exits). */
  async settled(): Promise<void> {
    await Promise.all([this.rewrites.settled(), this.memoryRewrites.settled()]);
  }

  /**
   * Stops model rewrites: summaries stay markers and are rewritten at the next start; memories
   * being restated are deleted.
   */
  async close(): Promise<void> {
    await Promise.all([this.rewrites.close(), this.memoryRewrites.close()]);
  }

  private async redactToolRows(target: RedactionTarget, channelId?: string): Promise<HistoryEntry[]> {
    const changed: HistoryEntry[] = [];
    const seen = new Set<string>();
    // In the message's own channel every tool row is read, for loose quotes; elsewhere the rows
    // that hold a verbatim stretch of it (a search with a wider scope quoted it there).
    const sources: Array<AsyncIterable<EntryRow>> = [];
    if (channelId !== undefined) sources.push(this.statements.channelToolRows.iterate(channelId) as AsyncIterable<EntryRow>);
    sources.push(this.candidateToolRows(target));
    for (const source of sources) for await (const row of source) {
      const key = `${row.channel_id}|${row.seq}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const content = redactToolBlock(row.content, target);
      if (content === undefined) continue;
      changed.push({ ...toEntry(row), content, tokens: estimateEntryTokens({ kind: row.kind, authorName: row.author_name, content }) });
    }
    for (const entry of changed) await this.statements.updateEntry.run(entry.content, entry.tokens, entry.channelId, entry.seq);
    return changed;
  }

  /**
   * The bot's own replies after the message that quote it (a stretch of at least 20 characters,
   * whitespace and case aside) lose those stretches; the rest of the reply stays.
   */
  private async redactOwnReplies(
    channelId: string,
    removed: readonly RemovedMessage[],
    note: string,
  ): Promise<Array<{ entry: HistoryEntry; before: string }>> {
    const quoted = quotable(removed);
    if (quoted.length === 0) return [];
    const index = quoteIndex(quoted.map((message) => message.content));
    const after = Math.min(...quoted.map((message) => message.seq));
    const changed: Array<{ entry: HistoryEntry; before: string }> = [];
    for (const row of (await this.statements.repliesAfter.all(channelId, after)) as EntryRow[]) {
      const content = redactQuotes(row.content, index, note);
      if (content === row.content) continue;
      const entry = { ...toEntry(row), content, tokens: estimateEntryTokens({ kind: 'message', authorName: row.author_name, content }) };
      await this.statements.updateEntry.run(entry.content, entry.tokens, channelId, entry.seq);
      changed.push({ entry, before: row.content });
    }
    return changed;
  }

  /**
   * The task a worker was given (shown by `/tasks`, quoted in its report and in the notice of an
   * interrupted worker) is plain text that may quote the message: its words become the note.
   * Returns how many tasks changed.
   */
  private async redactWorkerTasks(target: RedactionTarget): Promise<number> {
    if (target.texts.length === 0) return 0;
    // Every task is read (a handful per channel): a task that quotes the message loosely
    // (another case, other line breaks, a part of it) escapes any SQL prefilter.
    const rows = (await this.statements.tasks.all()) as Array<{ id: string; task: string }>;
    let changed = 0;
    for (const row of rows) {
      const task = replaceTexts(row.task, target);
      if (task === row.task) continue;
      await this.statements.updateTask.run(task, row.id);
      changed += 1;
    }
    return changed;
  }

  /**
   * Tool rows that may quote the target: those containing, verbatim, a message id or the
   * longest stretch of each text that JSON leaves unescaped (a block's JSON holds its text
   * escaped twice). Found by `instr` in SQLite, so a delete does not parse every tool row
   * ever stored; when a text has no such stretch worth the name, every tool row is checked.
   */
  private async *candidateToolRows(target: RedactionTarget): AsyncIterable<EntryRow> {
    const fragments = [...target.messageIds];
    for (const text of target.texts) {
      const fragment = longestVerbatimRun(text);
      if (fragment.length < MIN_FRAGMENT) {
        yield* this.statements.toolRows.iterate() as AsyncIterable<EntryRow>;
        return;
      }
      fragments.push(fragment);
    }
    // A few hundred terms a statement: SQLite refuses an expression deeper than 1,000, and
    // erasing a user brings every message of theirs in a channel at once. A row that matches
    // in two statements is read twice; the caller takes it once.
    for (let start = 0; start < fragments.length; start += FRAGMENTS_PER_QUERY) {
      const batch = fragments.slice(start, start + FRAGMENTS_PER_QUERY);
      const matches = batch.map(() => 'instr(content, ?) > 0').join(' OR ');
      yield* this.options.db
        .prepare(`SELECT * FROM history_entries WHERE kind IN ('tool_call', 'tool_result') AND (${matches})`)
        .iterate(...batch) as AsyncIterable<EntryRow>;
    }
  }

  /**
   * Every summary that covered a removed message loses its words at once: an extractive one is
   * rewritten now from what remains; a model-written one becomes a truncation marker (not sent
   * as a summary) until a rewrite lands; a retired one keeps only a placeholder.
   */
  private async retireCoveringSummaries(
    channelId: string,
    removed: readonly RemovedMessage[],
  ): Promise<{ changed: Array<SummaryEntry & { live: boolean }>; toRewrite: number[] }> {
    const touched = new Map<number, SummaryRow>();
    for (const message of removed) {
      for (const row of (await this.statements.covering.all(channelId, message.seq, message.seq)) as SummaryRow[]) touched.set(row.id, row);
    }
    const changed: Array<SummaryEntry & { live: boolean }> = [];
    const toRewrite: number[] = [];
    for (const row of touched.values()) {
      this.rewrites.touch(row.id);
      if (row.live === 0) {
        if (row.content !== RETIRED_PLACEHOLDER) await this.statements.updateSummary.run(row.kind, RETIRED_PLACEHOLDER, row.tokens, 0, 0, row.id);
        continue;
      }
      if (row.kind === 'marker' && row.needs_rewrite === 0) continue; // A marker quotes nothing.
      const messages = (await this.statements.rangeMessages.all(channelId, row.from_seq, row.to_seq, row.to_seq)) as EntryRow[];
      if (row.summarizer === 'extractive' || messages.length === 0) {
        changed.push(await this.rewriteExtractive(row, messages.map(toEntry)));
      } else {
        const draft = { kind: 'marker' as const, fromSeq: row.from_seq, toSeq: row.to_seq, content: markerText(messages.length) };
        const tokens = estimateSummaryTokens(draft);
        await this.statements.updateSummary.run('marker', draft.content, tokens, 1, 1, row.id);
        // What the summary cost, for its rewrite (a second delete in its range keeps the first figure).
        if (row.kind === 'summary') await this.statements.rewriteTokens.run(row.tokens, row.id);
        changed.push({ ...toSummary(row), ...draft, tokens, live: true });
        toRewrite.push(row.id);
      }
    }
    return { changed, toRewrite };
  }

  /** Extractive rewrite from the archive; a range with nothing left is retired. */
  private async rewriteExtractive(row: SummaryRow, entries: HistoryEntry[]): Promise<SummaryEntry & { live: boolean }> {
    const settings = this.options.fallbackSettings(row.channel_id);
    // No longer than the summary it replaces: the channel's context never grows by a delete.
    const room = rewriteRoom(row);
    const content = entries.length === 0 ? '' : extractiveSummary({ entries, priorSummaries: [], settings, ...(room !== undefined ? { maxSummaryTokens: rewriteTextRoom(row, room) } : {}) });
    if (content === '') {
      await this.statements.updateSummary.run(row.kind, RETIRED_PLACEHOLDER, row.tokens, 0, 0, row.id);
      return { ...toSummary(row), content: RETIRED_PLACEHOLDER, live: false };
    }
    const draft = { kind: 'summary' as const, fromSeq: row.from_seq, toSeq: row.to_seq, content };
    const tokens = estimateSummaryTokens(draft);
    await this.statements.updateSummary.run('summary', content, tokens, 0, 1, row.id);
    // Written from every message of its range: a roll-up's folded markers too.
    await this.statements.readAll.run(row.id);
    return { ...toSummary(row), ...draft, tokens, live: true };
  }


}

/**
 * What leaves tool rows and worker tasks when `removed` change: their texts (alone and after
 * their author's name) and any `also` (memories drawn from them), replaced by the mode's note.
 */
export function removalTarget(removed: readonly RemovedMessage[], mode: 'delete' | 'edit', also: readonly string[] = []): RedactionTarget {
  return redactionTarget({
    messageIds: removed.map((message) => message.messageId),
    texts: [...removed.flatMap((message) => (message.content === '' ? [] : [message.content, `${message.authorName}: ${message.content}`])), ...also],
    note: mode === 'delete' ? DELETED_NOTE : EDITED_NOTE,
  });
}

/**
 * The quotes a reply loses when `removed` change (as `redactOwnReplies` finds them): undefined
 * when none of them is long enough to be quoted.
 */
export function ownReplyQuotes(removed: readonly RemovedMessage[]): QuoteIndex | undefined {
  const quoted = quotable(removed);
  return quoted.length === 0 ? undefined : quoteIndex(quoted.map((message) => message.content));
}

/** The removed messages a reply could have quoted: still in history, and long enough to quote. */
function quotable(removed: readonly RemovedMessage[]): RemovedMessage[] {
  return removed.filter((message) => message.seq >= 0 && message.content.length >= MIN_QUOTE_LENGTH);
}

/** How long the ids of deleted messages are remembered (longer than any worker runs). */
const TOMBSTONE_MS = 86_400_000;

/** Shorter stretches would match too many rows to be worth a prefilter. */
const MIN_FRAGMENT = 4;
/** Fragments matched by one statement, well below SQLite's expression depth of 1,000. */
const FRAGMENTS_PER_QUERY = 200;

/** The longest run of characters JSON.stringify writes as they are (no quote, backslash, control). */
export function longestVerbatimRun(text: string): string {
  let best = '';
  for (const run of text.split(/["\\\u0000-\u001f\u2028\u2029]/)) if (run.length > best.length) best = run;
  return best;
}
