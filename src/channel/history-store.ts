import { MagpieError } from '../common/errors.js';
import { KeyedRead } from '../storage/keyed-read.js';
import type { ScriptStep, SqlClient } from '../storage/sql-client.js';
import { channelDialectFor } from './channel-dialect.js';
import type { EntryKind, HistoryEntry, SummaryEntry } from '../context/types.js';
import type { ChannelLocation, LoadedChannel, NewSummary, SpliceChange, SummaryWrites } from '../context/history-store.js';

export type { ChannelLocation, LoadedChannel, NewSummary, SpliceChange } from '../context/history-store.js';

/** A `history_entries` row as SQLite returns it. */
export interface EntryRow {
  channel_id: string;
  seq: number;
  message_id: string;
  kind: EntryKind;
  role: 'user' | 'assistant';
  author_id: string;
  author_name: string;
  content: string;
  created_at: number;
  tokens: number;
  turn_id: number;
}

/** A `history_summaries` row as SQLite returns it (the columns every reader needs). */
export interface SummaryRow {
  id: number;
  channel_id: string;
  kind: 'summary' | 'marker';
  from_seq: number;
  to_seq: number;
  content: string;
  tokens: number;
  created_at: number;
}

/** The entry's (channel, seq) key is taken: SQLite's primary key error, or PostgreSQL's unique violation on it. */
function isSeqTaken(error: unknown): boolean {
  const { code, constraint } = error as { code?: string; constraint?: string };
  if (code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return true;
  return code === '23505' && constraint === 'history_entries_pkey';
}

export function toEntry(row: EntryRow): HistoryEntry {
  return {
    seq: row.seq,
    channelId: row.channel_id,
    messageId: row.message_id,
    kind: row.kind,
    role: row.role,
    authorId: row.author_id,
    authorName: row.author_name,
    content: row.content,
    createdAt: row.created_at,
    tokens: row.tokens,
    turnId: row.turn_id,
  };
}

export function toSummary(row: SummaryRow): SummaryEntry {
  return {
    id: row.id,
    channelId: row.channel_id,
    kind: row.kind,
    fromSeq: row.from_seq,
    toSeq: row.to_seq,
    content: row.content,
    tokens: row.tokens,
    createdAt: row.created_at,
  };
}

/**
 * The database side of channel history: prepared statements only, no policy. Every method
 * resolves once its write is done (a multi-statement change in one transaction), so a caller
 * changes its in-memory mirror after the await, and only then.
 */
export class HistoryStore implements SummaryWrites {
  private readonly statements;

  /** What loading a channel reads: on PostgreSQL a burst of channels shares each statement. */
  private readonly loads;

  constructor(private readonly db: SqlClient) {
    const bySeq = (left: Record<string, unknown>, right: Record<string, unknown>): number => Number(left.seq) - Number(right.seq);
    this.loads = {
      // The suffix from live_from_seq, and before it the entries of turns that go on past it.
      liveEntries: new KeyedRead(
        db,
        `SELECT * FROM history_entries
          WHERE channel_id = @key
            AND seq >= COALESCE((SELECT live_from_seq FROM history_channels WHERE channel_id = @key), 0)
         UNION ALL
         SELECT * FROM history_entries
          WHERE channel_id = @key
            AND seq < COALESCE((SELECT live_from_seq FROM history_channels WHERE channel_id = @key), 0)
            AND turn_id IN (
              SELECT turn_id FROM history_entries
               WHERE channel_id = @key
                 AND seq >= COALESCE((SELECT live_from_seq FROM history_channels WHERE channel_id = @key), 0))
          ORDER BY seq`,
        bySeq,
      ),
      liveSummaries: new KeyedRead(
        db,
        'SELECT * FROM history_summaries WHERE channel_id = @key AND live = 1 ORDER BY from_seq',
        (left, right) => Number(left.from_seq) - Number(right.from_seq),
      ),
      // The counters, where the channel is and its newest platform id, one row for any channel.
      // Longest first, then greatest: numeric order for digit strings without leading zeros.
      facts: new KeyedRead(
        db,
        `SELECT (SELECT MAX(seq) FROM history_entries WHERE channel_id = @key) AS max_seq,
                (SELECT MAX(to_seq) FROM history_summaries WHERE channel_id = @key) AS max_summary_seq,
                (SELECT MAX(turn_id) FROM history_entries WHERE channel_id = @key) AS max_turn,
                (SELECT COUNT(*) FROM history_entries WHERE channel_id = @key) AS total,
                (SELECT guild_id FROM history_entries
                  WHERE channel_id = @key AND (guild_id IS NOT NULL OR dm_user_id IS NOT NULL) ORDER BY seq DESC LIMIT 1) AS guild_id,
                (SELECT dm_user_id FROM history_entries
                  WHERE channel_id = @key AND (guild_id IS NOT NULL OR dm_user_id IS NOT NULL) ORDER BY seq DESC LIMIT 1) AS dm_user_id,
                (SELECT message_id FROM history_entries WHERE channel_id = @key AND kind = 'message' AND ${channelDialectFor(db).digitsOnlyMessageId}
                  ORDER BY length(message_id) DESC, message_id DESC LIMIT 1) AS newest_message_id`,
      ),
      unarchived: new KeyedRead(db, 'SELECT * FROM history_entries WHERE channel_id = @key AND archived = 0 ORDER BY seq', bySeq),
    };
    this.statements = {
      insert: db.prepare(INSERT_ENTRY),
      byMessageId: db.prepare('SELECT * FROM history_entries WHERE channel_id = ? AND message_id = ?'),
      bySeq: db.prepare('SELECT * FROM history_entries WHERE channel_id = ? AND seq = ?'),
      markArchived: db.prepare('UPDATE history_entries SET archived = 1 WHERE channel_id = ? AND seq = ?'),
      updateContent: db.prepare('UPDATE history_entries SET content = ?, tokens = ? WHERE channel_id = ? AND seq = ?'),
      deleteEntry: db.prepare('DELETE FROM history_entries WHERE channel_id = ? AND seq = ?'),
      moveLiveStart: db.prepare(
        `INSERT INTO history_channels (channel_id, live_from_seq) VALUES (?, ?)
         ON CONFLICT (channel_id) DO UPDATE SET live_from_seq = excluded.live_from_seq`,
      ),
      retireSummary: db.prepare('UPDATE history_summaries SET live = 0 WHERE id = ?'),
      shrinkMarker: db.prepare('UPDATE history_summaries SET from_seq = ?, content = ?, tokens = ? WHERE id = ?'),
      extendMarker: db.prepare('UPDATE history_summaries SET to_seq = ?, content = ?, tokens = ? WHERE id = ?'),
      insertSummary: db.prepare(
        `INSERT INTO history_summaries (channel_id, kind, from_seq, to_seq, content, tokens, created_at, summarizer, read_from_seq)
         VALUES (@channelId, @kind, @fromSeq, @toSeq, @content, @tokens, @createdAt, @summarizer, @readFromSeq)`,
      ),
      allEntries: db.prepare('SELECT * FROM history_entries WHERE channel_id = ? ORDER BY seq'),
      allSummaries: db.prepare('SELECT * FROM history_summaries WHERE channel_id = ? ORDER BY id'),
    };
  }

  async load(channelId: string): Promise<LoadedChannel> {
    const [entryRows, summaryRows, factsRow] = await Promise.all([
      this.loads.liveEntries.rows(channelId),
      this.loads.liveSummaries.rows(channelId),
      this.loads.facts.row(channelId),
    ]);
    const facts = factsRow as {
      max_seq: number | null;
      max_summary_seq: number | null;
      max_turn: number | null;
      total: number;
      guild_id: string | null;
      dm_user_id: string | null;
      newest_message_id: string | null;
    };
    const location: ChannelLocation = {};
    if (facts.guild_id) location.guildId = facts.guild_id;
    if (facts.dm_user_id) location.dmUserId = facts.dm_user_id;
    return {
      entries: (entryRows as EntryRow[]).map(toEntry),
      summaries: (summaryRows as SummaryRow[]).map(toSummary),
      nextSeq: Math.max(facts.max_seq ?? 0, facts.max_summary_seq ?? 0) + 1,
      nextTurnId: (facts.max_turn ?? 0) + 1,
      archivedCount: facts.total,
      location,
      newestPlatformId: facts.newest_message_id ?? undefined,
    };
  }

  /**
   * Returns false when the channel already holds this message id (idempotent ingest). Entries
   * that never go to the transcript index (tool traffic) are born `archived`, and so are
   * messages whose transcript row the caller writes in the same transaction.
   */
  async insert(entry: HistoryEntry, location: ChannelLocation, options: { archived?: boolean } = {}): Promise<boolean> {
    try {
      const result = await this.statements.insert.run(...insertParams(entry, location, options.archived ?? entry.kind !== 'message'));
      return result.changes > 0;
    } catch (error) {
      if (!isSeqTaken(error)) throw error;
      throw new MagpieError('history_seq_taken', `channel ${entry.channelId}: sequence number ${entry.seq} is already taken by another message`, {
        cause: error,
        context: { channelId: entry.channelId, seq: entry.seq },
        hint: 'another process wrote this data dir without its writer lock; stop it and restart Magpie (nothing was dropped)',
      });
    }
  }

  /**
   * Inserts many entries at once (a group commit); returns how many were new, so a caller can
   * tell that one of them was already held. On PostgreSQL, where each statement is a round trip,
   * they go in one statement; SQLite runs one statement each, all in one synchronous step.
   */
  async insertMany(rows: ReadonlyArray<{ entry: HistoryEntry; location: ChannelLocation; archived: boolean }>): Promise<number> {
    if (rows.length === 1) return (await this.insert(rows[0]!.entry, rows[0]!.location, { archived: rows[0]!.archived })) ? 1 : 0;
    if (!channelDialectFor(this.db).insertsInOneStatement) {
      // One synchronous step on SQLite. A sequence number already taken fails the group, which
      // the group commit then retries entry by entry, and `insert` names the one.
      const results = await this.statements.insert.runEach(rows.map((row) => insertParams(row.entry, row.location, row.archived)));
      return results.filter((result) => result.changes > 0).length;
    }
    const result = await this.db
      .prepare(
        `INSERT INTO history_entries
           (channel_id, seq, message_id, kind, role, author_id, author_name, content, created_at, tokens, turn_id, archived, guild_id, dm_user_id)
         SELECT * FROM unnest(@channelIds::text[], @seqs::bigint[], @messageIds::text[], @kinds::text[], @roles::text[],
           @authorIds::text[], @authorNames::text[], @contents::text[], @createdAts::bigint[], @tokens::bigint[],
           @turnIds::bigint[], @archived::bigint[], @guildIds::text[], @dmUserIds::text[])
         ON CONFLICT (channel_id, message_id) DO NOTHING`,
      )
      .run({
        channelIds: rows.map((row) => row.entry.channelId),
        seqs: rows.map((row) => row.entry.seq),
        messageIds: rows.map((row) => row.entry.messageId),
        kinds: rows.map((row) => row.entry.kind),
        roles: rows.map((row) => row.entry.role),
        authorIds: rows.map((row) => row.entry.authorId),
        authorNames: rows.map((row) => row.entry.authorName),
        contents: rows.map((row) => row.entry.content),
        createdAts: rows.map((row) => row.entry.createdAt),
        tokens: rows.map((row) => row.entry.tokens),
        turnIds: rows.map((row) => row.entry.turnId),
        archived: rows.map((row) => (row.archived ? 1 : 0)),
        guildIds: rows.map((row) => row.location.guildId ?? null),
        dmUserIds: rows.map((row) => row.location.dmUserId ?? null),
      });
    return result.changes;
  }

  /**
   * `insertMany`'s rows as a step of a script for SQLite's writer thread: a message id already
   * held changes no row, which fails the script, and the group commit then retries one by one.
   */
  insertStep(rows: ReadonlyArray<{ entry: HistoryEntry; location: ChannelLocation; archived: boolean }>): ScriptStep {
    return { sql: INSERT_ENTRY, paramLists: rows.map((row) => insertParams(row.entry, row.location, row.archived)), mustChange: true };
  }

  /**
   * Which of these entries are stored as given (channel, sequence number and message id), after
   * a commit whose outcome is unknown: one statement on PostgreSQL, one lookup each on SQLite.
   */
  async heldEntries(entries: ReadonlyArray<Pick<HistoryEntry, 'channelId' | 'seq' | 'messageId'>>): Promise<boolean[]> {
    const key = (channelId: string, seq: number, messageId: string) => `${channelId}\u0000${seq}\u0000${messageId}`;
    const held = new Set<string>();
    if (channelDialectFor(this.db).insertsInOneStatement) {
      const rows = (await this.db
        .prepare(
          `SELECT h.channel_id, h.seq, h.message_id FROM history_entries h
             JOIN unnest(@channelIds::text[], @seqs::bigint[]) AS asked(channel_id, seq) ON h.channel_id = asked.channel_id AND h.seq = asked.seq`,
        )
        .all({ channelIds: entries.map((entry) => entry.channelId), seqs: entries.map((entry) => entry.seq) })) as Array<{ channel_id: string; seq: number; message_id: string }>;
      for (const row of rows) held.add(key(row.channel_id, row.seq, row.message_id));
    } else {
      for (const entry of entries) {
        const row = (await this.statements.bySeq.get(entry.channelId, entry.seq)) as EntryRow | undefined;
        if (row) held.add(key(row.channel_id, row.seq, row.message_id));
      }
    }
    return entries.map((entry) => held.has(key(entry.channelId, entry.seq, entry.messageId)));
  }

  /** The time of the channel's newest stored message, or undefined when it has none. */
  async lastMessageTime(channelId: string): Promise<number | undefined> {
    const row = (await this.db.prepare('SELECT MAX(created_at) AS at FROM history_entries WHERE channel_id = ?').get(channelId)) as { at: number | null };
    return row.at ?? undefined;
  }

  findByMessageId(channelId: string, messageId: string): Promise<HistoryEntry | undefined> {
    // Not an async function: the ingest path asks this for every message, one step fewer each.
    return this.statements.byMessageId.get(channelId, messageId).then((row) => (row ? toEntry(row as EntryRow) : undefined));
  }

  async findBySeq(channelId: string, seq: number): Promise<HistoryEntry | undefined> {
    const row = (await this.statements.bySeq.get(channelId, seq)) as EntryRow | undefined;
    return row ? toEntry(row) : undefined;
  }

  async unarchived(channelId: string): Promise<HistoryEntry[]> {
    return ((await this.loads.unarchived.rows(channelId)) as EntryRow[]).map(toEntry);
  }

  async markArchived(entries: ReadonlyArray<{ channelId: string; seq: number }>): Promise<void> {
    await this.db.transaction(async () => {
      for (const entry of entries) await this.statements.markArchived.run(entry.channelId, entry.seq);
    });
  }

  async updateContent(channelId: string, seq: number, content: string, tokens: number): Promise<void> {
    await this.statements.updateContent.run(content, tokens, channelId, seq);
  }

  async deleteEntries(channelId: string, seqs: readonly number[]): Promise<void> {
    await this.db.transaction(async () => {
      for (const seq of seqs) await this.statements.deleteEntry.run(channelId, seq);
    });
  }

  /**
   * Emergency truncation: the oldest live entries up to `toSeq` leave the live context, one
   * marker takes their place. Two single-row writes, whatever the number of entries.
   */
  truncate(channelId: string, range: { toSeq: number }, marker: NewSummary): Promise<number> {
    return this.db.transaction(async () => {
      await this.statements.moveLiveStart.run(channelId, range.toSeq + 1);
      return Number((await this.statements.insertSummary.run({ summarizer: null, readFromSeq: null, ...marker })).lastInsertRowid);
    });
  }

  /**
   * Emergency truncation folded into the newest marker instead of stacking another one: the
   * marker's range grows to `toSeq`. Two single-row writes, like `truncate`.
   */
  async extendMarker(channelId: string, marker: { id: number; toSeq: number; content: string; tokens: number }): Promise<void> {
    await this.db.transaction(async () => {
      await this.statements.moveLiveStart.run(channelId, marker.toSeq + 1);
      await this.statements.extendMarker.run(marker.toSeq, marker.content, marker.tokens, marker.id);
    });
  }

  /** A compaction's result, all or nothing. Returns the new summary's id. */
  splice(change: SpliceChange): Promise<number> {
    return this.db.transaction(async () => {
      if (change.entryRange) await this.statements.moveLiveStart.run(change.channelId, change.entryRange.toSeq + 1);
      for (const id of change.retiredSummaryIds) await this.statements.retireSummary.run(id);
      if (change.shrunkMarker) {
        const marker = change.shrunkMarker;
        await this.statements.shrinkMarker.run(marker.fromSeq, marker.content, marker.tokens, marker.id);
      }
      return Number((await this.statements.insertSummary.run({ summarizer: null, readFromSeq: null, ...change.summary })).lastInsertRowid);
    });
  }

  /** Every entry ever kept for the channel, live or not (the archive), in order. */
  async archive(channelId: string): Promise<HistoryEntry[]> {
    return ((await this.statements.allEntries.all(channelId)) as EntryRow[]).map(toEntry);
  }

  /** Every summary and marker ever written for the channel, live or retired. */
  async allSummaries(channelId: string): Promise<Array<SummaryEntry & { live: boolean }>> {
    return ((await this.statements.allSummaries.all(channelId)) as Array<SummaryRow & { live: number }>).map((row) => ({
      ...toSummary(row),
      live: row.live === 1,
    }));
  }
}

/**
 * The values of the history insert by position (binding fourteen named values from an object
 * cost a message about a microsecond more). `archived`: born archived when its transcript row is
 * written in the same transaction.
 */
/**
 * Only a known message id is skipped (idempotent ingest); a sequence number already taken by
 * another message is an error, never a silently dropped message.
 */
const INSERT_ENTRY = `INSERT INTO history_entries
   (channel_id, seq, message_id, kind, role, author_id, author_name, content, created_at, tokens, turn_id, archived, guild_id, dm_user_id)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
 ON CONFLICT (channel_id, message_id) DO NOTHING`;

function insertParams(entry: HistoryEntry, location: ChannelLocation, archived: boolean): unknown[] {
  return [
    entry.channelId,
    entry.seq,
    entry.messageId,
    entry.kind,
    entry.role,
    entry.authorId,
    entry.authorName,
    entry.content,
    entry.createdAt,
    entry.tokens,
    entry.turnId,
    archived ? 1 : 0,
    location.guildId ?? null,
    location.dmUserId ?? null,
  ];
}
