import { camelToSnake } from './schema.js';
import type { MagpieConfig } from './types.js';

/** One setting that differs between two configs, by its TOML key path. */
export interface ConfigChange {
  path: string;
  from: unknown;
  to: unknown;
}

/**
 * Settings that are read once when the bot starts (connections, the database, indexes). A
 * reload still records them, and the log says they wait for a restart.
 */
export const RESTART_ONLY_PATHS: readonly string[] = [
  'memory.',
  // The model client is built once at start from the whole [llm] table (model id, endpoint,
  // key, timeout, retries, concurrency), so none of it changes a running bot.
  'llm.',
  'discord.token_env',
  'discord.register_commands',
  // The metrics listener is bound once at start.
  'metrics.',
];

export function needsRestart(path: string): boolean {
  return RESTART_ONLY_PATHS.some((prefix) => (prefix.endsWith('.') ? path.startsWith(prefix) : path === prefix));
}

/** Every leaf that changed, with snake_case paths as in the file (`channels.123.context_window`). */
export function diffConfig(previous: MagpieConfig, next: MagpieConfig): ConfigChange[] {
  const changes: ConfigChange[] = [];
  walk(previous, next, [], changes);
  return changes;
}

function walk(previous: unknown, next: unknown, path: string[], changes: ConfigChange[]): void {
  const bothTables = isPlainObject(previous) && isPlainObject(next);
  if (!bothTables) {
    if (JSON.stringify(previous) !== JSON.stringify(next)) {
      changes.push({ path: path.join('.'), from: previous, to: next });
    }
    return;
  }
  const keys = new Set([...Object.keys(previous), ...Object.keys(next)]);
  // Channel ids are data, not settings: they keep their spelling.
  const underChannels = path.length === 1 && path[0] === 'channels';
  for (const key of keys) {
    const name = underChannels ? key : camelToSnake(key);
    walk(previous[key], next[key], [...path, name], changes);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `path: old → new`, long strings shortened; a config holds no secrets, only variable names. */
export function describeChange(change: ConfigChange): string {
  return `${change.path}: ${show(change.from)} → ${show(change.to)}`;
}

function show(value: unknown): string {
  if (value === undefined) return '(none)';
  if (isPlainObject(value)) return '{…}';
  const text = JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}…"` : text;
}
