/** A config file on disk with a watcher on it, recording reload outcomes and log lines. */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { LiveConfig, loadConfigFile, watchConfigFile, type ReloadOutcome } from '../../src/config/index.js';

export interface WatchLogLine {
  level: 'info' | 'warn';
  fields: Record<string, unknown>;
  message: string;
}

/** Polls `condition` until it holds or the deadline passes (no fixed sleeps). */
export async function waitFor(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Writes `initial` to `dir/name` and watches it with short debounce and poll intervals. */
export function watchTestConfig(dir: string, name: string, initial: string) {
  const file = path.join(dir, name);
  writeFileSync(file, initial);
  const live = new LiveConfig(loadConfigFile(file, { env: {} }));
  const outcomes: ReloadOutcome[] = [];
  const logs: WatchLogLine[] = [];
  const watcher = watchConfigFile({
    path: file,
    live,
    env: {},
    debounceMs: 20,
    pollIntervalMs: 50,
    onReload: (outcome) => outcomes.push(outcome),
    logger: {
      info: (fields, message) => logs.push({ level: 'info', fields: fields as Record<string, unknown>, message }),
      warn: (fields, message) => logs.push({ level: 'warn', fields: fields as Record<string, unknown>, message }),
    },
  });
  return { file, live, outcomes, logs, watcher };
}
