import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { Summarizer } from '../compaction/summarizer.js';
import type { CompactionSettings } from '../config/types.js';
import type { MemoryStore, PendingRewrite, RewriteOutcome } from '../memory/types.js';
import { firstCharacters, MAX_MEMORY_LENGTH } from '../memory/validation.js';
import type { SqlClient } from '../storage/sql-client.js';

export interface MemoryRewriteOptions {
  db: SqlClient;
  memory: MemoryStore;
  events: EventStream;
  /** Restates memories (`restateMemory`); without that method memories that lose a source are deleted. */
  summarizer: Summarizer;
  /** The channel's compaction settings: a rewrite gets the worker's timeout. */
  fallbackSettings(channelId: string): CompactionSettings;
}

/** What this process holds of a memory waiting for its rewrite: the store holds only a marker. */
interface HeldRewrite {
  job: PendingRewrite;
  /** The memory's text before the removal, its quotes of the removed messages taken out. */
  text: string;
  /** Takes the removed messages' quotes out of a text (the messages it still rests on, too). */
  redact: (text: string) => string;
  /** Bumped by every removal that reaches the memory, so a rewrite started before starts over. */
  generation: number;
}

/** Why a memory was deleted instead of restated (the `reason` of `memory_rewrite_dropped`). */
type DropReason = 'no_model' | 'no_source' | 'unsupported' | 'model_failed' | 'interrupted';

/**
 * Model rewrites of memories that lost a source message but still rest on others: the model
 * gets the memory's text and the remaining messages, never the removed one, and restates what
 * they support. When it cannot (no model, a failure, nothing supported, no message left) the
 * memory is deleted: text drawn from a removed message is never kept for want of a rewrite.
 *
 * The old text lives only here, in memory, while the model works; the store holds a marker. A
 * memory whose rewrite was cut short (shutdown, crash) is deleted, at close or at the next load
 * of its channel.
 */
export class MemoryRewrites {
  private readonly held = new Map<string, HeldRewrite>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  /** Channels whose removal is between marking memories and handing them here (`during`). */
  private readonly marking = new Map<string, number>();

  constructor(private readonly options: MemoryRewriteOptions) {}

  /**
   * Runs `work`, which marks memories of the channel and hands them to `start`: meanwhile
   * `resume` does not take the marked memories for ones an earlier run left behind.
   */
  async during<T>(channelId: string, work: () => Promise<T>): Promise<T> {
    this.marking.set(channelId, (this.marking.get(channelId) ?? 0) + 1);
    try {
      return await work();
    } finally {
      const left = this.marking.get(channelId)! - 1;
      if (left === 0) this.marking.delete(channelId);
      else this.marking.set(channelId, left);
    }
  }

  /** Whether memories that lose a source can wait for a rewrite (a model is there to write it). */
  get available(): boolean {
    return this.options.summarizer.restateMemory !== undefined;
  }

  /**
   * Starts the rewrite of memories that `dropSources` left waiting. `redact` takes the removed
   * messages' quotes out of their text, and out of the messages they still rest on, before any
   * of it is sent.
   */
  start(pending: readonly PendingRewrite[], redact: (text: string) => string): void {
    for (const job of pending) {
      const known = this.held.get(job.id);
      const text = job.content ?? known?.text;
      if (text === undefined) {
        void this.drop(job, 'interrupted');
        continue;
      }
      // A memory that lost several sources one after another loses the quotes of each.
      const redactAll = known ? (value: string) => redact(known.redact(value)) : redact;
      this.held.set(job.id, { job, text: redact(text), redact: redactAll, generation: (known?.generation ?? 0) + 1 });
      this.run(job.id);
    }
  }

  /** Memories of the channel left waiting by a run that ended before their rewrite: deleted. */
  async resume(channelId: string): Promise<void> {
    const pending = (await this.options.memory.pendingRewrites?.(channelId)) ?? [];
    for (const job of pending) {
      if (this.held.has(job.id) || this.marking.has(channelId)) continue;
      await this.drop(job, 'interrupted');
    }
  }

  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running.values()]);
  }

  /** Stops the model calls; the memories they were restating are deleted (their text is lost with this process). */
  async close(): Promise<void> {
    this.abort.abort(new Error('shutting down'));
    await this.settled();
    for (const { job } of [...this.held.values()]) await this.drop(job, 'interrupted');
  }

  private run(id: string): void {
    if (this.running.has(id) || this.abort.signal.aborted) return;
    const work = this.rewrite(id).then(
      (again) => {
        this.running.delete(id);
        if (again) this.run(id);
      },
      (error: unknown) => {
        this.running.delete(id);
        const job = this.held.get(id)?.job;
        // No longer held: the next load of its channel deletes it (`resume`).
        this.held.delete(id);
        this.options.events.emit({ type: 'memory_rewrite_failed', channel_id: job?.channelId, memory_id: id, error: errorMessage(error) });
      },
    );
    this.running.set(id, work);
  }

  /** Returns true when the memory changed meanwhile and must be rewritten again. */
  private async rewrite(id: string): Promise<boolean> {
    const held = this.held.get(id);
    if (!held) return false;
    const { job, text, generation, redact } = held;
    const restate = this.options.summarizer.restateMemory;
    const sources = (await this.sourcesOf(job)).map((source) => ({ ...source, content: redact(source.content) }));
    let outcome: RewriteOutcome = 'delete';
    let reason: DropReason | undefined;
    let failure: string | undefined;
    if (!restate) reason = 'no_model';
    else if (sources.length === 0) reason = 'no_source';
    else {
      const settings = this.options.fallbackSettings(job.channelId);
      const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(settings.workerTimeoutMs)]);
      try {
        // A model that ignores the signal still loses the race against it.
        const restated = await Promise.race([
          restate({ channelId: job.channelId, ...(job.memoryType ? { memoryType: job.memoryType } : {}), memory: text, sources, signal }),
          new Promise<never>((_, reject) => {
            if (signal.aborted) reject(signal.reason);
            signal.addEventListener('abort', () => reject(signal.reason), { once: true });
          }),
        ]);
        if (restated === undefined) reason = 'unsupported';
        else outcome = { content: firstCharacters(restated, MAX_MEMORY_LENGTH), sourceIds: job.sourceIds };
      } catch (error) {
        // Shutting down: `close` deletes it.
        if (this.abort.signal.aborted) return false;
        reason = 'model_failed';
        failure = errorMessage(error);
      }
    }
    // Another removal reached it meanwhile: start over from what remains now.
    if (this.held.get(id)?.generation !== generation) return true;
    const status = await this.options.memory.finishRewrite!(id, outcome);
    if (status === 'superseded') {
      // Its sources changed under it (another process removed one): read them again.
      const now = (await this.options.memory.pendingRewrites?.(job.channelId))?.find((pending) => pending.id === id);
      if (this.held.get(id)?.generation !== generation) return true;
      if (!now) {
        this.held.delete(id);
        return false;
      }
      held.job = { ...job, sourceIds: now.sourceIds };
      return true;
    }
    if (this.held.get(id)?.generation !== generation) return true;
    this.held.delete(id);
    if (status === 'rewritten') {
      this.options.events.emit({ type: 'memory_rewritten', channel_id: job.channelId, memory_id: id, sources: sources.length });
    } else if (status === 'deleted') {
      this.options.events.emit({
        type: 'memory_rewrite_dropped',
        channel_id: job.channelId,
        memory_id: id,
        reason,
        ...(failure ? { error: failure } : {}),
      });
    }
    return false;
  }

  private async drop(job: PendingRewrite, reason: DropReason): Promise<void> {
    this.held.delete(job.id);
    try {
      if ((await this.options.memory.finishRewrite?.(job.id, 'delete')) === 'deleted') {
        this.options.events.emit({ type: 'memory_rewrite_dropped', channel_id: job.channelId, memory_id: job.id, reason });
      }
    } catch (error) {
      this.options.events.emit({ type: 'memory_rewrite_failed', channel_id: job.channelId, memory_id: job.id, error: errorMessage(error) });
    }
  }

  /** The messages the memory still rests on, as history holds them now, oldest first. */
  private async sourcesOf(job: PendingRewrite): Promise<Array<{ authorName: string; content: string }>> {
    if (job.sourceIds.length === 0) return [];
    const marks = job.sourceIds.map(() => '?').join(', ');
    const rows = (await this.options.db
      .prepare(
        `SELECT author_name, content FROM history_entries
          WHERE channel_id = ? AND kind = 'message' AND message_id IN (${marks}) ORDER BY seq`,
      )
      .all(job.channelId, ...job.sourceIds)) as Array<{ author_name: string; content: string }>;
    return rows.map((row) => ({ authorName: row.author_name, content: row.content }));
  }
}
