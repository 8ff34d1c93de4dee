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

/** Discord's epoch: snowflakes count milliseconds from it in their upper bits. */
const DISCORD_EPOCH_MS = 1_420_070_400_000n;

/**
 * A message id shaped like Discord's, the `index`-th of those made at `atMs`: ids grow with time
 * as the gateway's do, and the order of the message indexes depends on that.
 */
export function snowflake(atMs: number, index: number): string {
  return ((BigInt(Math.floor(atMs)) - DISCORD_EPOCH_MS) * 4_194_304n + BigInt(index)).toString();
}

/** When the floor's messages were written, as far as their ids tell. */
const FLOOR_MS = Date.UTC(2026, 0, 1);

export function floorRow(index: number, channels: number): FloorRow {
  const text = `alice: message ${index}: the watering rota moves to thursdays from next week`;
  return {
    channel: (700_000_000_000_000_000n + BigInt(index % channels)).toString(),
    seq: Math.floor(index / channels) + 1,
    messageId: snowflake(FLOOR_MS, index),
    text,
    searchText: searchText(text),
    hash: `h${index}`,
    tags: `k${index % channels} kt`,
    // Each message a turn of its own, numbered per channel as the runtime numbers them.
    turn: Math.floor(index / channels) + 1,
  };
}
