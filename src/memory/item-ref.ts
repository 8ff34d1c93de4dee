import { InputError, MagpieError } from '../common/errors.js';
import type { SqlClient } from '../storage/sql-client.js';
import type { MemoryKind } from './types.js';

/** An id someone typed, resolved to the store's own id, with what it was recognised as. */
export interface ItemRef {
  /** The store's id: `msg-40` (an archived message) or `mem-12` (a memory). */
  id: string;
  kind: MemoryKind;
  channelId: string;
  /** How the typed id was read: the store's own id, or the platform's id of the message. */
  matched: 'internal id' | 'platform message id';
  /** The platform's id of an archived message, when it has one. */
  messageId?: string;
}

interface ItemRow {
  rowid: number;
  kind: MemoryKind;
  channel_id: string;
  message_id: string | null;
}

const INTERNAL = /^(mem|msg)-(\d{1,15})$/;

/**
 * Reads an id as people see it in outputs: the store's own `msg-40` / `mem-12`, or the platform
 * message id that search results, `memory list` and Discord show (`message_id`). A bare number
 * is first a platform id (transcript and Discord ids are numbers too) and only then a row
 * number. Throws a `not_found` error naming both forms when nothing matches, or an InputError
 * naming the channels to choose from when one platform id was reused in several.
 */
export async function resolveItemRef(db: SqlClient, typed: string, options: { channelId?: string } = {}): Promise<ItemRef> {
  const given = typed.trim();
  const internal = INTERNAL.exec(given);
  if (internal) {
    const row = await byRowid(db, Number(internal[2]));
    if (row && row.kind === (internal[1] === 'mem' ? 'memory' : 'transcript')) return toRef(row, 'internal id');
    throw notFound(given, 'internal');
  }
  const platform = await byMessageId(db, given, options.channelId);
  if (platform.length === 1) return toRef(platform[0]!, 'platform message id');
  if (platform.length > 1) {
    const choices = platform.map((row) => `${itemId(row)} in channel ${row.channel_id}`).join(', ');
    throw new InputError(`message id '${given}' is archived in ${platform.length} channels: ${choices}`, {
      hint: 'give the msg-N id of the one to forget',
    });
  }
  if (/^\d{1,15}$/.test(given)) {
    const row = await byRowid(db, Number(given));
    if (row) return toRef(row, 'internal id');
  }
  throw notFound(given, 'any');
}

/** Not an input error (exit 2): the id is well formed, the store just does not hold it (exit 1). */
function notFound(given: string, form: 'internal' | 'any'): MagpieError {
  const looked = form === 'internal' ? "the store's own id" : "a platform message id and as the store's own id";
  return new MagpieError('not_found', `no memory or transcript entry with id '${given}' (looked for it as ${looked})`, {
    context: { id: given },
    hint: "ids look like msg-40 (an archived message) or mem-12 (a memory), or the platform's message id (message_id in search results); find them with magpie memory search or memory list",
  });
}

async function byRowid(db: SqlClient, rowid: number): Promise<ItemRow | undefined> {
  return (await db.prepare('SELECT rowid, kind, channel_id, message_id FROM memory_items WHERE rowid = ?').get(rowid)) as ItemRow | undefined;
}

async function byMessageId(db: SqlClient, messageId: string, channelId: string | undefined): Promise<ItemRow[]> {
  const rows = (await db
    .prepare(`SELECT rowid, kind, channel_id, message_id FROM memory_items WHERE kind = 'transcript' AND message_id = ? ORDER BY rowid`)
    .all(messageId)) as ItemRow[];
  return channelId === undefined ? rows : rows.filter((row) => row.channel_id === channelId);
}

function itemId(row: ItemRow): string {
  return `${row.kind === 'memory' ? 'mem' : 'msg'}-${row.rowid}`;
}

function toRef(row: ItemRow, matched: ItemRef['matched']): ItemRef {
  return {
    id: itemId(row),
    kind: row.kind,
    channelId: row.channel_id,
    matched,
    ...(row.message_id ? { messageId: row.message_id } : {}),
  };
}
