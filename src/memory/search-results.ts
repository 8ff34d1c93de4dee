// Search hits in the shape the `memory_search` tool returns, and the public ids of items.
import type { ItemRow } from './item-rows.js';
import type { MemoryKind, SearchResult } from './types.js';

/**
 * The match is named on its own and its neighbours are listed apart, labelled, so a reader can
 * quote exactly the message that matched and cite it by id.
 */
export function transcriptResult(row: ItemRow, window: ItemRow[], score: number): SearchResult {
  const matchAt = window.findIndex((item) => item.rowid === row.rowid);
  return {
    id: itemId(row),
    content: row.content,
    score: round(score),
    kind: 'transcript',
    source_ids: window.map((item) => item.message_id ?? '').filter((id) => id.length > 0),
    created_at: new Date(row.created_at).toISOString(),
    message_id: row.message_id ?? '',
    author: row.author_name ?? '',
    neighbors: window
      .filter((item) => item.rowid !== row.rowid)
      .map((item) => ({
        position: window.indexOf(item) < matchAt ? ('before' as const) : ('after' as const),
        message_id: item.message_id ?? '',
        author: item.author_name ?? '',
        created_at: new Date(item.created_at).toISOString(),
        content: withoutAuthor(item.content, item.author_name),
      })),
  };
}

export function itemId(row: { rowid: number; kind: MemoryKind }): string {
  return `${row.kind === 'memory' ? 'mem' : 'msg'}-${row.rowid}`;
}

/** The rowid behind a public id (`mem-12`, `msg-34`, or a bare number); undefined if malformed. */
export function parseItemId(id: string): number | undefined {
  const match = /^(?:(?:mem|msg)-)?(\d{1,15})$/.exec(id.trim());
  return match ? Number(match[1]) : undefined;
}

/** Transcript text is stored as `Author: text`; the author is named in its own field. */
function withoutAuthor(content: string, author: string | null): string {
  return author && content.startsWith(`${author}: `) ? content.slice(author.length + 2) : content;
}

export function toResult(row: ItemRow, score: number): SearchResult {
  const result: SearchResult = {
    id: itemId(row),
    content: row.content,
    score: round(score),
    kind: row.kind,
    source_ids: row.kind === 'transcript' ? (row.message_id ? [row.message_id] : []) : parseSourceIds(row.source_ids),
    created_at: new Date(row.created_at).toISOString(),
  };
  if (row.memory_type) result.memory_type = row.memory_type;
  if (row.kind === 'transcript') {
    result.message_id = row.message_id ?? '';
    result.author = row.author_name ?? '';
    result.neighbors = [];
  }
  return result;
}

export function parseSourceIds(text: string): string[] {
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? parsed.filter((value): value is string => typeof value === 'string') : [];
  } catch {
    return [];
  }
}

function round(value: number): number {
  return Math.round(value * 10_000) / 10_000;
}
