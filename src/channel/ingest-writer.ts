import { MagpieError } from '../common/errors.js';
import type { HistoryEntry } from '../context/types.js';
import type { MemoryStore, TranscriptEntryInput } from '../memory/types.js';
import { DEFAULT_GROUP_COMMIT_BATCH, GroupCommit } from '../storage/group-commit.js';
import type { ScriptStep, SqlClient } from '../storage/sql-client.js';
import { isPostgres } from '../storage/sql-client.js';
import type { ChannelLocation, HistoryStore } from './history-store.js';

/**
 * On PostgreSQL each commit also costs round trips and a turn of the event loop per statement:
 * during a burst, bigger groups carry more messages per second (measured at +5 ms each way, one
 * group at a time: about 1,900 messages/s with groups of 1,000, 2,100–2,300 with 4,000). A group
 * is only this big when that many messages arrived while the groups before it committed.
 */
const POSTGRES_GROUP_COMMIT_BATCH = 4_000;

/**
 * Where transactions run in parallel (PostgreSQL), two groups commit at once, each on a
 * connection of its own: while one waits for its COMMIT, the server writes the next and the
 * event loop is free to take more messages in (a store in use, 1,000 channels: about 7,500 →
 * 8,600–9,500 messages/s at loopback). Only with a slot to spare for the other transactions
 * (vector batches, turns, compactions): a pool too small for that commits one group at a time.
 */
const GROUPS_IN_FLIGHT = 2;

export interface IngestWriterOptions {
  db: SqlClient;
  store: HistoryStore;
  memory: MemoryStore;
  /** Most rows one group commit carries (default: 1,000 on SQLite, 4,000 on PostgreSQL). */
  maxBatch?: number;
}

/**
 * Writes appended entries to the database. Incoming messages go through a group commit (many
 * channels' messages share one transaction), and when the memory store lives in the same
 * database a message's transcript row (full text at once, vector owed) is written in the same
 * transaction as its history row: once a write resolves, the message is both durable and
 * searchable. With a memory store elsewhere (tests' fakes), the runtime archives separately.
 */
export class IngestWriter {
  private readonly group: GroupCommit<{ entry: HistoryEntry; location: ChannelLocation }>;
  private readonly stage: ((entries: TranscriptEntryInput[]) => void | Promise<void>) | undefined;
  private readonly script: ((entries: TranscriptEntryInput[]) => { steps: ScriptStep[]; committed: () => void }) | undefined;

  constructor(private readonly options: IngestWriterOptions) {
    this.stage = options.memory.transcriptStager?.(options.db);
    this.script = this.stage ? options.memory.transcriptScript?.(options.db) : undefined;
    this.group = new GroupCommit({
      db: options.db,
      write: (payloads) => this.insertGroup(payloads),
      ...(this.script && options.db.scriptOffThread ? { commitWhole: (payloads) => this.commitOffThread(payloads) } : {}),
      // A COMMIT with no answer: the rows are looked for before the mirror is decided.
      stored: (payloads) => options.store.heldEntries(payloads.map(({ entry }) => entry)),
      maxBatch: options.maxBatch ?? (isPostgres(options.db) ? POSTGRES_GROUP_COMMIT_BATCH : DEFAULT_GROUP_COMMIT_BATCH),
      // SQLite has one connection: a second group would only wait for the first.
      concurrency: options.db.transactionSlots > GROUPS_IN_FLIGHT ? GROUPS_IN_FLIGHT : 1,
    });
  }

  /** True when transcript rows commit with their history rows (no separate archive step). */
  get staged(): boolean {
    return this.stage !== undefined;
  }

  /** Nothing queued or being committed. */
  get idle(): boolean {
    return this.group.idle;
  }

  /** Commits and writes carried so far; `whole`: groups SQLite's writer thread committed. */
  get stats(): { commits: number; writes: number; largestGroup: number; whole: number } {
    return this.group.stats;
  }

  /**
   * Queues a message's history row (and its transcript row) for the next group commit; resolves
   * once committed. Rejects when the channel already holds that message id (another writer got
   * there first) or when the commit fails; the caller then takes the entry back out of memory.
   */
  write(entry: HistoryEntry, location: ChannelLocation): Promise<void> {
    return this.group.submit({ entry, location });
  }

  /**
   * Writes entries now, inside the caller's open transaction (a turn's reply and tool traffic).
   * Returns false for an entry whose message id the channel already holds.
   */
  async insertNow(entry: HistoryEntry, location: ChannelLocation): Promise<boolean> {
    if (!(await this.options.store.insert(entry, location, { archived: this.stage !== undefined || entry.kind !== 'message' }))) return false;
    if (this.stage && entry.kind === 'message') await this.stage([transcriptInput(entry, location)]);
    return true;
  }

  /**
   * Writes a message's history row in a transaction of its own, now (after whatever is queued).
   * For a memory store in another database, whose archive step must start right away.
   */
  async writeNow(entry: HistoryEntry, location: ChannelLocation): Promise<void> {
    await this.group.flush();
    await this.options.db.transaction(() => this.insert(entry, location));
  }

  /** Commits whatever is queued; await it before a write that must come after it. Never rejects. */
  flush(): Promise<void> {
    return this.group.flush();
  }

  /** A group's history rows, then their transcript rows: a few statements for the whole group. */
  private async insertGroup(payloads: ReadonlyArray<{ entry: HistoryEntry; location: ChannelLocation }>): Promise<void> {
    const rows = payloads.map(({ entry, location }) => ({ entry, location, archived: this.stage !== undefined || entry.kind !== 'message' }));
    if ((await this.options.store.insertMany(rows)) < rows.length) {
      // Rolled back, then retried one by one: the message already held is named then.
      const first = payloads[0]!.entry;
      throw new MagpieError(
        'history_conflict',
        payloads.length === 1
          ? `channel ${first.channelId} already holds seq ${first.seq} or message ${first.messageId}`
          : `one of ${payloads.length} messages is already held`,
        { context: { channelId: first.channelId } },
      );
    }
    if (!this.stage) return;
    const transcripts = payloads.filter(({ entry }) => entry.kind === 'message').map(({ entry, location }) => transcriptInput(entry, location));
    if (transcripts.length > 0) await this.stage(transcripts);
  }

  /**
   * A group's history and transcript rows as one script for SQLite's writer thread (the same rows
   * `insertGroup` writes); false when the thread cannot take it, and `insertGroup` runs instead.
   */
  private async commitOffThread(payloads: ReadonlyArray<{ entry: HistoryEntry; location: ChannelLocation }>): Promise<boolean> {
    let committed: (() => void) | undefined;
    // Built only once the thread takes it: without one, `insertGroup` builds the same rows.
    const sent = await this.options.db.scriptOffThread!(() => {
      const history = this.options.store.insertStep(payloads.map(({ entry, location }) => ({ entry, location, archived: true })));
      const messages = payloads.filter(({ entry }) => entry.kind === 'message').map(({ entry, location }) => transcriptInput(entry, location));
      if (messages.length === 0) return [history];
      const transcripts = this.script!(messages);
      committed = transcripts.committed;
      return [history, ...transcripts.steps];
    });
    if (!sent) return false;
    committed?.();
    return true;
  }

  private async insert(entry: HistoryEntry, location: ChannelLocation): Promise<void> {
    if (!(await this.insertNow(entry, location))) {
      throw new MagpieError('history_conflict', `channel ${entry.channelId} already holds seq ${entry.seq} or message ${entry.messageId}`, {
        context: { channelId: entry.channelId },
      });
    }
  }
}

export function transcriptInput(entry: HistoryEntry, location: ChannelLocation): TranscriptEntryInput {
  return {
    messageId: entry.messageId,
    channelId: entry.channelId,
    ...location,
    authorId: entry.authorId,
    authorName: entry.authorName,
    content: entry.content,
    createdAt: entry.createdAt,
  };
}
