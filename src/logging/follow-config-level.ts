import type { LiveConfig } from '../config/live-config.js';
import { isLogLevel, LOG_LEVEL_ENV } from './create-logger.js';

/**
 * Applies `[logging] level` changes from hot reload to a running logger, unless `LOG_LEVEL`
 * pins the level. Returns a function that stops following.
 */
export function followConfigLevel(
  live: LiveConfig,
  logger: { level: string },
  env: NodeJS.ProcessEnv = process.env,
): () => void {
  return live.subscribe((next, previous) => {
    // Only a valid LOG_LEVEL pins the level; an invalid one was ignored at start, so it is here too.
    if (isLogLevel(env[LOG_LEVEL_ENV]?.trim().toLowerCase())) return;
    if (next.logging.level !== previous.logging.level) logger.level = next.logging.level;
  });
}
