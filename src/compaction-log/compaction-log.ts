import type { Clock } from '../common/clock.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream, MagpieEvent } from '../common/events.js';
import type { ChannelSettings } from '../config/types.js';
import { KeyedRead } from '../storage/keyed-read.js';
import { storageError } from '../storage/storage-error.js';
import { isPostgres, type SqlClient } from '../storage/sql-client.js';
import { MODEL_USAGE_KIND, type LogRow } from './log-row.js';

/** The compaction events the log keeps (everything the coordinator says about compaction). */
export const LOGGED_EVENTS: ReadonlySet<string> = new Set([
  'compaction_triggered',
  'compaction_started',
  'compaction_completed',
  'compaction_failed',
  'compaction_replanned',
  'emergency_truncation',
]);

const DAY_MS = 86_400_000;
/** Pruning runs at most this often (runtime clock), not on every write. */
const PRUNE_EVERY_MS = 3_600_000;

/** The little the log reads of a channel at a check (a `ChannelState` fits). */
export interface ObservedChannel {
  readonly channelId: string;
  /** Entries in the channel's history, live or not: the report's x axis. */
  readonly archivedCount: number;
  readonly entries: { readonly length: number };
  readonly summaries: { readonly length: number };
  /** What the channel's system prompt counts in its estimate (a persona's, or the configured one). */
  readonly promptTokens: number;
}

export interface CompactionLogOptions {
  db: SqlClient;
  clock: Clock;
  /**
   * Days of log to keep (read at each prune, so hot reload applies); rows older than that
   * before the newest row are deleted. Absent: keep everything (a replay's report covers the
   * whole transcript, whatever its dates).
   */
  retentionDays?: () => number;
  /** Most rows kept (the newest), read at each prune like `retentionDays`. Absent: no bound by count. */
  maxRows?: () => number;
  /** Where a failed write is reported (`compaction_log_failed`, once per run of failures). */
  events?: EventStream;
  /** The channel's entry count for an event seen before any check of that channel. */
  positionOf?: (channelId: string) => number;
  /** Usage samples wait in memory for this many, an event, or `flush()` (default 64). */
  batchSize?: number;
  /** Also flush buffered samples this often (an unref'd timer); default: never. */
  flushEveryMs?: number;
  /** Waits before each new attempt at a write that failed with a passing fault (default `LOG_WRITE_RETRY_DELAYS_MS`). */
  retryDelaysMs?: readonly number[];
}

/** About 5 s of attempts in all: past that the rows are given up and `compaction_log_failed` says so. */
const LOG_WRITE_RETRY_DELAYS_MS: readonly number[] = [250, 1_000, 4_000];

interface ChannelMemo {
  position: number;
  percent: number;
  /** Usage per estimated token at the last check (calibration and usable window included). */
  scale: number;
  settings: ChannelSettings | undefined;
  promptTokens: number;
  toolTokens: number;
  settingsKey: string | undefined;
}

/**
 * Writes the compaction log. `observe` is called by the Compactor at every check: it costs a
 * map lookup and a comparison unless usage entered another whole percent or the settings
 * changed, and even then it only queues a row. Rows are written in batches, in one
 * transaction; compaction events flush at once, so what an operator looks for is on disk.
 */
export class CompactionLog {
  private readonly channels = new Map<string, ChannelMemo>();
  private pending: QueuedRow[] = [];
  /** The write in progress (or the last one): writes go one after another, in order. */
  private writing: Promise<void> = Promise.resolve();
  private readonly insert;
  private readonly insertMany;
  private readonly lastSettings;
  private lastPruneAt = Number.NEGATIVE_INFINITY;
  private failing = false;
  private readonly timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: CompactionLogOptions) {
    this.insert = options.db.prepare(
      `INSERT INTO compaction_log (channel_id, at, kind, tier, position, usage, data)
       VALUES (@channel_id, @at, @kind, @tier, @position, @usage, @data)`,
    );
    // PostgreSQL: a batch in one statement (a thousand channels' first checks are two thousand
    // rows), in the order queued, which the identity keeps.
    this.insertMany = isPostgres(options.db)
      ? options.db.prepare(
          `INSERT INTO compaction_log (channel_id, at, kind, tier, position, usage, data)
           SELECT channel_id, at, kind, tier, position, usage, data
             FROM unnest(@channelIds::text[], @ats::bigint[], @kinds::text[], @tiers::text[], @positions::bigint[], @usages::float8[], @datas::text[])
                  WITH ORDINALITY AS queued(channel_id, at, kind, tier, position, usage, data, place)
            ORDER BY place`,
        )
      : undefined;
    this.lastSettings = new KeyedRead(options.db, "SELECT data FROM compaction_log WHERE channel_id = @key AND kind = 'settings' ORDER BY id DESC LIMIT 1");
    if (options.retentionDays || options.maxRows) void this.prune();
    if (options.flushEveryMs !== undefined) {
      this.timer = setInterval(() => void this.flush(), options.flushEveryMs);
      this.timer.unref();
    }
  }

  /**
   * The Compactor's hook: usage and estimate of one check, with the tokens of the tool
   * definitions the estimate counted (none in a replay). Never throws.
   */
  observe(channel: ObservedChannel, usage: number, estimatedTokens: number, settings: ChannelSettings, toolTokens = 0): void {
    let memo = this.channels.get(channel.channelId);
    if (!memo) {
      memo = { position: 0, percent: -1, scale: 0, settings: undefined, promptTokens: -1, toolTokens: -1, settingsKey: undefined };
      this.channels.set(channel.channelId, memo);
    }
    memo.position = channel.archivedCount;
    if (estimatedTokens > 0) memo.scale = usage / estimatedTokens;
    if (memo.settings !== settings || memo.promptTokens !== channel.promptTokens || memo.toolTokens !== toolTokens) {
      this.noteSettings(channel.channelId, memo, settings, { promptTokens: channel.promptTokens, toolTokens });
    }
    const percent = Math.floor(usage * 100);
    if (percent === memo.percent) return;
    memo.percent = percent;
    this.queue({
      channel_id: channel.channelId,
      kind: 'usage',
      tier: null,
      position: channel.archivedCount,
      usage: round(usage),
      data: JSON.stringify({
        estimated_tokens: estimatedTokens,
        context_window: settings.contextWindow,
        live_messages: channel.entries.length,
        summaries: channel.summaries.length,
      }),
    });
    if (this.pending.length >= (this.options.batchSize ?? 64)) void this.flush();
  }

  /** Stores every compaction event of the stream. Returns a function that detaches. */
  attach(events: EventStream): () => void {
    return events.subscribe((event) => this.record(event));
  }

  /**
   * Stores one event if it is a compaction event (and flushes, with the samples before it), or a
   * channel request's model usage (batched like the samples: there is one per reply).
   */
  record(event: MagpieEvent): void {
    const cost = event.type === MODEL_USAGE_KIND;
    if ((!cost && !LOGGED_EVENTS.has(event.type)) || typeof event.channel_id !== 'string') return;
    const channelId = event.channel_id;
    const memo = this.channels.get(channelId);
    const position = memo?.position ?? this.options.positionOf?.(channelId) ?? 0;
    const fields: Record<string, unknown> = { ...event };
    delete fields.type;
    delete fields.channel_id;
    this.queue({
      channel_id: channelId,
      kind: event.type,
      tier: event.type === 'emergency_truncation' ? 'emergency' : typeof event.tier === 'string' ? event.tier : null,
      position,
      usage: cost ? null : usageAfter(event, memo?.scale),
      data: JSON.stringify(fields),
    });
    if (!cost || this.pending.length >= (this.options.batchSize ?? 64)) void this.flush();
  }

  /**
   * Writes what is queued, in one transaction, after any write still in progress; resolves once
   * done. Never rejects: a failure is reported, and the rows dropped.
   */
  flush(): Promise<void> {
    if (this.pending.length === 0 || this.closed) return this.writing;
    const rows = this.pending;
    this.pending = [];
    // Decided at the flush, not at the write: the clock may have moved on meanwhile (a replay).
    const at = this.options.clock.now();
    const pruneAfter = at - this.lastPruneAt >= PRUNE_EVERY_MS;
    if (pruneAfter) this.lastPruneAt = at;
    this.writing = this.writing.then(() => this.write(rows, pruneAfter));
    return this.writing;
  }

  private async write(rows: readonly QueuedRow[], pruneAfter: boolean): Promise<void> {
    for (let attempt = 0; ; attempt += 1) {
      const outcome = await this.writeOnce(rows);
      if (outcome === undefined) break;
      // A passing fault (a PostgreSQL reply late past its deadline, a connection that dropped, a
      // busy database) is tried again a few times before the rows are given up. Later rows wait
      // behind, so the log keeps its order.
      const delay = this.options.retryDelaysMs?.[attempt] ?? LOG_WRITE_RETRY_DELAYS_MS[attempt];
      if (!outcome.retryable || delay === undefined) {
        // The log is for looking back; a full disk must not stop the channel.
        if (!this.failing) this.options.events?.emit({ type: 'compaction_log_failed', rows: rows.length, reason: errorMessage(outcome.error) });
        this.failing = true;
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    this.failing = false;
    if (pruneAfter) await this.pruneNow();
  }

  /** One attempt at writing `rows`; undefined once written, or what failed and whether trying again may help. */
  private async writeOnce(rows: readonly QueuedRow[]): Promise<{ error: unknown; retryable: boolean } | undefined> {
    try {
      await this.options.db.transaction(async () => {
        // One lookup for the batch (one statement on PostgreSQL), then every insert issued at
        // once, pipelined. The settings already on record for a channel (after a restart) need
        // no new row.
        const stored = await this.lastSettings.many(rows.filter((row) => row.unlessStored).map((row) => row.channel_id));
        const inserts: LogRow[] = [];
        for (const { unlessStored, ...row } of rows) {
          const last = stored.get(row.channel_id)?.[0] as { data: string } | undefined;
          if (!unlessStored || last?.data !== row.data) inserts.push(row);
        }
        if (this.insertMany && inserts.length > 1) await this.insertMany.run(columnsOf(inserts));
        else await Promise.all(inserts.map((row) => this.insert.run(row)));
      });
      return undefined;
    } catch (error) {
      // A COMMIT whose answer never came is not retried: the rows may be stored already.
      return { error, retryable: storageError('', error)?.retryable === true };
    }
  }

  /**
   * Deletes rows older than the retention before the newest row, then all but the newest
   * `maxRows`, after the writes queued before; returns how many. Never measured against the wall clock: a log written by a
   * replay of old conversations keeps what it recorded.
   */
  prune(): Promise<number> {
    this.lastPruneAt = this.options.clock.now();
    const pruned = this.writing.then(() => this.pruneNow());
    this.writing = pruned.then(() => undefined);
    return pruned;
  }

  /** `prune` now, for a caller already in the write queue. Never rejects. */
  private async pruneNow(): Promise<number> {
    const days = this.options.retentionDays?.();
    const maxRows = this.options.maxRows?.();
    if (days === undefined && maxRows === undefined) return 0;
    try {
      let deleted = 0;
      if (days !== undefined) {
        deleted += (await this.options.db
          .prepare('DELETE FROM compaction_log WHERE at < (SELECT MAX(at) FROM compaction_log) - ?')
          .run(days * DAY_MS)).changes;
      }
      if (maxRows !== undefined) {
        deleted += (await this.options.db
          .prepare('DELETE FROM compaction_log WHERE id <= (SELECT id FROM compaction_log ORDER BY id DESC LIMIT 1 OFFSET ?)')
          .run(maxRows)).changes;
      }
      return deleted;
    } catch (error) {
      this.options.events?.emit({ type: 'compaction_log_failed', rows: 0, reason: errorMessage(error) });
      return 0;
    }
  }

  /** Flushes and stops the timer; resolves once written. The database belongs to the caller. */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    const flushed = this.flush();
    this.closed = true;
    await flushed;
  }

  private noteSettings(channelId: string, memo: ChannelMemo, settings: ChannelSettings, counted: CountedTokens): void {
    memo.settings = settings;
    memo.promptTokens = counted.promptTokens;
    memo.toolTokens = counted.toolTokens;
    const key = JSON.stringify(settingsRecord(settings, counted));
    if (key === memo.settingsKey) return;
    // The first settings of a channel in this process are compared with the stored ones when written.
    const unlessStored = memo.settingsKey === undefined;
    memo.settingsKey = key;
    this.queue({ channel_id: channelId, kind: 'settings', tier: null, position: memo.position, usage: null, data: key }, unlessStored);
  }

  private queue(row: Omit<LogRow, 'at'>, unlessStored = false): void {
    if (this.closed) return;
    this.pending.push({ ...row, at: this.options.clock.now(), ...(unlessStored ? { unlessStored } : {}) });
  }
}

/** A row waiting for the next write; `unlessStored`: skipped when the channel's newest settings row holds the same. */
type QueuedRow = LogRow & { unlessStored?: boolean };

/** Rows as the arrays of one multi-row insert. */
function columnsOf(rows: readonly LogRow[]): Record<string, unknown[]> {
  return {
    channelIds: rows.map((row) => row.channel_id),
    ats: rows.map((row) => row.at),
    kinds: rows.map((row) => row.kind),
    tiers: rows.map((row) => row.tier),
    positions: rows.map((row) => row.position),
    usages: rows.map((row) => row.usage),
    datas: rows.map((row) => row.data),
  };
}

/** What an estimate counts besides the channel's summaries and messages. */
export interface CountedTokens {
  promptTokens: number;
  toolTokens: number;
}

/**
 * The settings the report shows, with their config names; with `counted`, also what the
 * runtime's estimate counted for the system prompt and the tool definitions (`prompt_tokens`,
 * `tool_tokens`), so that `magpie status` counts as that runtime did.
 */
export function settingsRecord(settings: ChannelSettings, counted?: CountedTokens): Record<string, number> {
  const compaction = settings.compaction;
  return {
    context_window: settings.contextWindow,
    max_response_tokens: settings.maxResponseTokens,
    background_threshold: compaction.backgroundThreshold,
    aggressive_threshold: compaction.aggressiveThreshold,
    emergency_threshold: compaction.emergencyThreshold,
    background_fraction: compaction.backgroundFraction,
    aggressive_fraction: compaction.aggressiveFraction,
    emergency_fraction: compaction.emergencyFraction,
    rollup_threshold: compaction.rollupThreshold,
    summary_max_tokens: compaction.summaryMaxTokens,
    max_worker_turns: compaction.maxWorkerTurns,
    fallback_after_failures: compaction.fallbackAfterFailures,
    ...(counted ? { prompt_tokens: counted.promptTokens, tool_tokens: counted.toolTokens } : {}),
  };
}

/** Usage right after the event, where the event tells it. */
function usageAfter(event: MagpieEvent, scale: number | undefined): number | null {
  if (event.type === 'compaction_triggered' && typeof event.usage === 'number') return event.usage;
  if (event.type === 'emergency_truncation' && typeof event.usage_after === 'number') return event.usage_after;
  if (event.type === 'compaction_completed' && typeof event.tokens_after === 'number' && scale) {
    // The event counts estimated tokens; usage also weighs in calibration and the usable window.
    return round(event.tokens_after * scale);
  }
  return null;
}

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
