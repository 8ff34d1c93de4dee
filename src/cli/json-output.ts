/**
 * The one voice of every `--json` output (docs/json-output.md): keys in snake_case at every
 * depth, times as ISO 8601 strings. Commands build their records from internal types (camelCase,
 * epoch milliseconds); this is the single place that turns them into what scripts read, so no
 * command can drift into a dialect of its own.
 */

/** `memoriesDeleted` → `memories_deleted`; keys that are not camelCase identifiers stay as they are. */
export function snakeKey(key: string): string {
  if (!/^[a-z][a-zA-Z0-9]*$/.test(key)) return key;
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** A key whose value is a point in time: `created_at`, `at`, `time`. */
export function isTimeKey(key: string): boolean {
  return key === 'at' || key === 'time' || key.endsWith('_at');
}

/** Milliseconds since the epoch that a Date can hold. */
function isEpochMilliseconds(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value) && Math.abs(value) <= 8.64e15;
}

/**
 * The value as it is printed: every object key in snake_case, Dates and epoch milliseconds
 * under a time key as ISO strings, `undefined` fields left out (as JSON.stringify does).
 */
export function outputJson(value: unknown, key = ''): unknown {
  if (value instanceof Date) return value.toISOString();
  if (isTimeKey(key) && isEpochMilliseconds(value)) return new Date(value).toISOString();
  if (Array.isArray(value)) return value.map((item) => outputJson(item, key));
  if (value !== null && typeof value === 'object') {
    const converted: Record<string, unknown> = {};
    for (const [name, inner] of Object.entries(value)) {
      if (inner === undefined) continue;
      const snake = snakeKey(name);
      converted[snake] = outputJson(inner, snake);
    }
    return converted;
  }
  return value;
}

/** One JSON value on one line, in the shared convention. */
export function jsonLine(value: unknown): string {
  return `${JSON.stringify(outputJson(value))}\n`;
}
