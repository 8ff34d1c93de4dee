import { readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import { describeChange, diffConfig, needsRestart, type ConfigChange } from './diff-config.js';
import type { LiveConfig } from './live-config.js';
import { checkConfigText } from './load-config.js';
import { formatProblem, type ConfigProblem } from './problems.js';

/** What one reload attempt did. */
export type ReloadOutcome =
  | { status: 'applied'; changes: ConfigChange[]; restartNeeded: string[] }
  | { status: 'unchanged' }
  | { status: 'refused'; problems: ConfigProblem[] }
  | { status: 'missing' };

/** The two pino methods the watcher uses; a pino `Logger` fits. */
export interface ConfigWatcherLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface ConfigWatcherOptions {
  /** The config file to follow (usually `loadConfig().path`). */
  path: string;
  /** Receives each valid new config through `replace`. */
  live: LiveConfig;
  logger?: ConfigWatcherLogger;
  /** Environment overrides applied exactly as at start (`MAGPIE_DATA_DIR`); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** Quiet period after the last file event before reading (editors write in bursts). Default 250. */
  debounceMs?: number;
  /** Safety net for file systems where fs.watch misses events: stat every N ms. 0 = off. Default 2000. */
  pollIntervalMs?: number;
  /** Called after every reload attempt (tests wait on it). */
  onReload?: (outcome: ReloadOutcome) => void;
}

/**
 * Follows the config file and hot-reloads it. Watches the *directory*, not the file: editors
 * that save by writing a new file and renaming it over the old one would otherwise leave the
 * watcher attached to a deleted inode. A slow stat poll backs fs.watch up. A valid change goes
 * to `live.replace` and the log lists each changed key (old → new); an invalid one is refused,
 * the running values stay, and the log lists every problem.
 */
export class ConfigWatcher {
  private readonly file: string;
  private readonly options: ConfigWatcherOptions;
  private directoryWatcher: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private debounceTimer: NodeJS.Timeout | undefined;
  /** Bytes last seen (applied or refused), so a repeated event for the same content is a no-op. */
  private lastText: Buffer | undefined;
  private lastSignature: string;
  private closed = false;

  constructor(options: ConfigWatcherOptions) {
    this.options = options;
    this.file = path.resolve(options.path);
    this.lastText = readText(this.file);
    this.lastSignature = signature(this.file);
    this.startWatching();
    // The running config was loaded earlier (start opens the database and indexes in between);
    // an edit made meanwhile raised no event we could see, so compare once now.
    if (this.lastText !== undefined && this.differsFromRunning(this.lastText)) {
      this.lastText = undefined;
      this.schedule();
    }
  }

  private differsFromRunning(text: Buffer): boolean {
    const result = checkConfigText(text, { source: this.file, env: this.options.env ?? process.env });
    return !result.ok || diffConfig(this.options.live.current(), result.config).length > 0;
  }

  /** Reads and applies the file now (what a file event does after the debounce). */
  reload(): ReloadOutcome {
    const outcome = this.reloadOnce();
    this.options.onReload?.(outcome);
    return outcome;
  }

  /** Stops watching; pending reloads are dropped. Safe to call twice. */
  close(): void {
    this.closed = true;
    this.directoryWatcher?.close();
    this.directoryWatcher = undefined;
    if (this.pollTimer) clearInterval(this.pollTimer);
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
  }

  private startWatching(): void {
    const directory = path.dirname(this.file);
    const name = path.basename(this.file);
    try {
      this.directoryWatcher = watch(directory, { persistent: false }, (_event, changed) => {
        // Some platforms give no file name; then any event in the directory may be ours.
        if (changed === null || changed.toString() === name) this.schedule();
      });
      this.directoryWatcher.on('error', (error) => {
        this.options.logger?.warn(
          { event: 'config_watch_error', file: this.file, error: error.message },
          'config directory watch failed; falling back to polling',
        );
        this.directoryWatcher?.close();
        this.directoryWatcher = undefined;
      });
    } catch (error) {
      this.options.logger?.warn(
        { event: 'config_watch_error', file: this.file, error: (error as Error).message },
        'cannot watch the config directory; polling instead',
      );
    }
    const interval = this.options.pollIntervalMs ?? 2000;
    if (interval > 0 || this.directoryWatcher === undefined) {
      this.pollTimer = setInterval(() => {
        const current = signature(this.file);
        if (current !== this.lastSignature) {
          this.lastSignature = current;
          this.schedule();
        }
      }, interval > 0 ? interval : 2000);
      this.pollTimer.unref();
    }
  }

  private schedule(): void {
    if (this.closed) return;
    if (this.debounceTimer) clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = undefined;
      if (this.closed) return;
      try {
        this.reload();
      } catch (error) {
        // This runs on a timer: an exception here would end the whole bot over a config edit.
        this.options.logger?.warn(
          { event: 'config_reload_error', file: this.file, error: (error as Error)?.message ?? String(error) },
          'config reload failed; running values kept',
        );
      }
    }, this.options.debounceMs ?? 250);
    this.debounceTimer.unref();
  }

  private reloadOnce(): ReloadOutcome {
    const logger = this.options.logger;
    this.lastSignature = signature(this.file);
    const text = readText(this.file);
    const unreadable = text === undefined ? unreadableReason(this.file) : undefined;
    if (unreadable !== undefined) {
      // There but not readable (a directory now, permissions): say so, not "gone".
      const problems: ConfigProblem[] = [{ path: '', message: `cannot read config file: ${unreadable}` }];
      logger?.warn(
        { event: 'config_refused', file: this.file, problems: problems.map(formatProblem) },
        'config change refused (the file cannot be read); running values kept',
      );
      this.lastText = undefined;
      return { status: 'refused', problems };
    }
    if (text === undefined) {
      // Mid-rename, or deleted: a vanished file is not a request to fall back to defaults.
      if (this.lastText !== undefined) {
        logger?.warn({ event: 'config_missing', file: this.file }, 'config file is gone; running values kept');
      }
      this.lastText = undefined;
      return { status: 'missing' };
    }
    if (this.lastText !== undefined && text.equals(this.lastText)) return { status: 'unchanged' };
    this.lastText = text;
    const result = checkConfigText(text, { source: this.file, env: this.options.env ?? process.env });
    if (!result.ok) {
      logger?.warn(
        { event: 'config_refused', file: this.file, problems: result.problems.map(formatProblem) },
        `config change refused (${result.problems.length} problem${result.problems.length === 1 ? '' : 's'}); running values kept`,
      );
      return { status: 'refused', problems: result.problems };
    }
    const changes = diffConfig(this.options.live.current(), result.config);
    if (changes.length === 0) return { status: 'unchanged' };
    try {
      this.options.live.replace(result.config);
    } catch (error) {
      // The new config is in force; a subscriber that failed to follow it is its own problem.
      logger?.warn(
        { event: 'config_listener_error', file: this.file, error: (error as Error)?.message ?? String(error) },
        'a config subscriber failed while applying the reload',
      );
    }
    const restartNeeded = changes.map((change) => change.path).filter(needsRestart);
    logger?.info(
      {
        event: 'config_reloaded',
        file: this.file,
        changes: changes.map(describeChange),
        ...(restartNeeded.length > 0 ? { restart_needed: restartNeeded } : {}),
      },
      `config reloaded: ${changes.length} setting${changes.length === 1 ? '' : 's'} changed` +
        (restartNeeded.length > 0
          ? `; ${restartNeeded.join(', ')} ${restartNeeded.length === 1 ? 'takes' : 'take'} effect after a restart`
          : ''),
    );
    return { status: 'applied', changes, restartNeeded };
  }
}

/** Starts following `options.path`; call `close()` on shutdown. */
export function watchConfigFile(options: ConfigWatcherOptions): ConfigWatcher {
  return new ConfigWatcher(options);
}

/** The file's bytes: checkConfigText decodes them strictly (a file that is not UTF-8 is refused). */
function readText(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

/** Why an existing path cannot be read as text, or undefined when it is simply absent (or fine). */
function unreadableReason(file: string): string | undefined {
  try {
    readFileSync(file, 'utf8');
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? undefined : (error as Error).message;
  }
}

function signature(file: string): string {
  try {
    const stats = statSync(file);
    return `${stats.ino}:${stats.size}:${stats.mtimeMs}`;
  } catch {
    return 'missing';
  }
}
