import type { ToolContext, ToolHandler, ToolOutcome } from '../llm/tool.js';
import type { SqlClient } from '../storage/sql-client.js';
import { channelDialectFor } from '../channel/channel-dialect.js';

/** The most messages one call returns. */
export const MAX_HISTORY_LIMIT = 50;
const DEFAULT_HISTORY_LIMIT = 20;
/** Longest message text returned; longer ones are cut with a marker. */
const MAX_CONTENT_CHARS = 2000;

const CHANNEL_HISTORY_DEFINITION = {
  name: 'channel_history',
  description:
    'Read messages of this channel from its archive, newest first: everything ever said here, even what was ' +
    'compacted out of the conversation long ago. Filter by time (before/after, ISO 8601 such as ' +
    '"2024-05-01T12:00:00Z") and/or by words that must all appear (query). With a query, each message comes with ' +
    'its neighbours. Each message has its message_id, author and created_at, so it can be quoted and cited.',
  input_schema: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'Words that must all appear in the message (case-insensitive).' },
      before: { type: 'string', description: 'Only messages written before this time (ISO 8601).' },
      after: { type: 'string', description: 'Only messages written after this time (ISO 8601).' },
      limit: { type: 'integer', minimum: 1, maximum: MAX_HISTORY_LIMIT, description: `Most messages to return (default ${DEFAULT_HISTORY_LIMIT}).` },
    },
    additionalProperties: false,
  },
};

interface Row {
  seq: number;
  message_id: string;
  author_name: string;
  content: string;
  created_at: number;
}

export interface HistoryMessage {
  message_id: string;
  author: string;
  content: string;
  /** ISO 8601. */
  created_at: string;
  /** With a query: the message just before and after the match, labelled. */
  neighbors?: Array<{ position: 'before' | 'after'; message_id: string; author: string; content: string; created_at: string }>;
}

/**
 * The worker's `channel_history` tool over the channel's archive (`history_entries`: every
 * message ever appended and not deleted). Scoped to the caller's channel; tool calls and
 * results are not messages and are left out. Bad input is a tool error naming the field.
 */
export function createChannelHistoryTool(db: SqlClient): ToolHandler {
  return {
    definition: CHANNEL_HISTORY_DEFINITION,
    async run(input: unknown, context: ToolContext): Promise<ToolOutcome> {
      const parsed = parseInput(input);
      if ('error' in parsed) return { isError: true, content: `invalid input: ${parsed.error}` };
      const conditions = [`channel_id = ?`, `kind = 'message'`];
      const parameters: Array<string | number> = [context.channelId];
      if (parsed.before !== undefined) {
        conditions.push('created_at < ?');
        parameters.push(parsed.before);
      }
      if (parsed.after !== undefined) {
        conditions.push('created_at > ?');
        parameters.push(parsed.after);
      }
      // SQLite's LIKE ignores case (ASCII); PostgreSQL's needs ILIKE for the same match.
      const like = channelDialectFor(db).likeIgnoringCase;
      for (const word of parsed.words) {
        conditions.push(`content ${like} ? ESCAPE '\\'`);
        parameters.push(`%${word.replace(/[\\%_]/g, (character) => `\\${character}`)}%`);
      }
      const rows = (await db
        .prepare(`SELECT seq, message_id, author_name, content, created_at FROM history_entries WHERE ${conditions.join(' AND ')} ORDER BY seq DESC LIMIT ?`)
        .all(...parameters, parsed.limit)) as Row[];
      const neighbour = async (row: Row, position: 'before' | 'after'): Promise<Row | undefined> =>
        (await db
          .prepare(
            position === 'before'
              ? `SELECT seq, message_id, author_name, content, created_at FROM history_entries WHERE channel_id = ? AND kind = 'message' AND seq < ? ORDER BY seq DESC LIMIT 1`
              : `SELECT seq, message_id, author_name, content, created_at FROM history_entries WHERE channel_id = ? AND kind = 'message' AND seq > ? ORDER BY seq LIMIT 1`,
          )
          .get(context.channelId, row.seq)) as Row | undefined;
      const messages: HistoryMessage[] = [];
      for (const row of rows) {
        const message = toMessage(row);
        if (parsed.words.length === 0) {
          messages.push(message);
          continue;
        }
        const around = [];
        for (const position of ['before', 'after'] as const) {
          const found = await neighbour(row, position);
          if (found) around.push({ position, ...toMessage(found) });
        }
        messages.push({ ...message, neighbors: around });
      }
      // What it showed may be named as a memory's source (and is inferred as one when none is).
      for (const message of messages) {
        context.seenSourceIds?.add(message.message_id);
        context.seenSources?.set(message.message_id, message.content);
      }
      return { isError: false, content: JSON.stringify(messages) };
    },
  };
}

function toMessage(row: Row): HistoryMessage {
  const content = row.content.length > MAX_CONTENT_CHARS ? `${row.content.slice(0, MAX_CONTENT_CHARS)}… (cut)` : row.content;
  return { message_id: row.message_id, author: row.author_name, content, created_at: new Date(row.created_at).toISOString() };
}

type Parsed = { words: string[]; before?: number; after?: number; limit: number } | { error: string };

function parseInput(input: unknown): Parsed {
  if (input === undefined || input === null) input = {};
  if (typeof input !== 'object' || Array.isArray(input)) return { error: 'channel_history takes a JSON object { query?, before?, after?, limit? }' };
  const fields = input as Record<string, unknown>;
  const unknownFields = Object.keys(fields).filter((key) => !['query', 'before', 'after', 'limit'].includes(key));
  if (unknownFields.length > 0) return { error: `unknown field ${unknownFields.join(', ')}; expected only query, before, after, limit` };
  let words: string[] = [];
  if (fields.query !== undefined) {
    if (typeof fields.query !== 'string') return { error: 'query must be a string' };
    words = fields.query.trim().split(/\s+/).filter((word) => word.length > 0).slice(0, 12);
  }
  const before = parseTime(fields.before, 'before');
  if (typeof before === 'string') return { error: before };
  const after = parseTime(fields.after, 'after');
  if (typeof after === 'string') return { error: after };
  if (before !== undefined && after !== undefined && after.at >= before.at) return { error: 'after must be earlier than before' };
  let limit = DEFAULT_HISTORY_LIMIT;
  if (fields.limit !== undefined) {
    if (typeof fields.limit !== 'number' || !Number.isInteger(fields.limit)) return { error: 'limit must be an integer' };
    if (fields.limit < 1 || fields.limit > MAX_HISTORY_LIMIT) return { error: `limit must be between 1 and ${MAX_HISTORY_LIMIT}, got ${fields.limit}` };
    limit = fields.limit;
  }
  return { words, limit, ...(before ? { before: before.at } : {}), ...(after ? { after: after.at } : {}) };
}

/** ISO 8601 text (or milliseconds since the epoch); a message naming the field otherwise. */
function parseTime(value: unknown, field: string): { at: number } | string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return { at: value };
  if (typeof value !== 'string' || value.trim() === '') return `${field} must be a time in ISO 8601, e.g. "2024-05-01T12:00:00Z"`;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return `${field} is not a time: ${JSON.stringify(value.slice(0, 60))}; use ISO 8601, e.g. "2024-05-01T12:00:00Z"`;
  return { at };
}
