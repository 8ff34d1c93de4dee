/**
 * The rows both raw ingest floors write (SQLite's and PostgreSQL's), so they measure the same
 * messages: `index` round-robin over `channels`, search text included.
 */
import { searchText } from '../src/memory/search-text.js';
import { snowflakeAt } from '../test/fakes/discord/state.js';

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

/** When the floor's messages were written, as far as their ids tell. */
const FLOOR_MS = Date.UTC(2026, 0, 1);

export function floorRow(index: number, channels: number): FloorRow {
  const text = `alice: message ${index}: the watering rota moves to thursdays from next week`;
  return {
    channel: (700_000_000_000_000_000n + BigInt(index % channels)).toString(),
    seq: Math.floor(index / channels) + 1,
    // Shaped like the gateway's ids, which grow with time: the order of the message indexes depends on it.
    messageId: snowflakeAt(FLOOR_MS, index),
    text,
    searchText: searchText(text),
    hash: `h${index}`,
    tags: `k${index % channels} kt`,
    // Each message a turn of its own, numbered per channel as the runtime numbers them.
    turn: Math.floor(index / channels) + 1,
  };
}
