/**
 * The rows both raw ingest floors write (SQLite's and PostgreSQL's), so they measure the same
 * messages: `index` round-robin over `channels`, search text included.
 */
import { searchText } from '../src/memory/search-text.js';

export interface FloorRow {
  channel: string;
  seq: number;
  messageId: string;
  /** Transcript text, speaker included. */
  text: string;
  searchText: string;
  hash: string;
  tags: string;
  turn: number;
}

export function floorRow(index: number, channels: number): FloorRow {
  const text = `alice: message ${index}: the watering rota moves to thursdays from next week`;
  return {
    channel: (700_000_000_000_000_000n + BigInt(index % channels)).toString(),
    seq: Math.floor(index / channels) + 1,
    messageId: `raw-${index}`,
    text,
    searchText: searchText(text),
    hash: `h${index}`,
    tags: `k${index % channels} kt`,
    turn: index + 1,
  };
}
