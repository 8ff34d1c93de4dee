/**
 * Progress of long CLI work (replay, export, index rebuilds, report) on stderr: a count, a rate
 * and, when the amount of work is known, a percentage and an ETA, redrawn in place at most a
 * few times a second. Only when the stream is a terminal: in a pipe or a log file it writes
 * nothing, so stdout and stderr stay machine-readable.
 *
 * ```ts
 * const progress = createProgress({ stream: io.stderr, label: 'replay', unit: 'messages' });
 * for (...) progress.update(count, { fraction: bytesRead / fileSize });
 * progress.finish();
 * ```
 */
export interface ProgressOptions {
  stream: NodeJS.WritableStream & { isTTY?: boolean };
  /** Shown first on the line (`replay`). */
  label: string;
  /** What is counted (`messages`). */
  unit: string;
  /** How many there will be, when known (gives a percentage and an ETA). */
  total?: number;
  /** Force on or off; default: on when the stream is a terminal. */
  enabled?: boolean;
  /** Milliseconds between redraws (default 250). */
  everyMs?: number;
  /** Monotonic time in ms; tests may replace it. */
  now?: () => number;
}

export interface Progress {
  /** Reports `count` done; `fraction` (0 to 1) when progress is measured otherwise (bytes read). */
  update(count: number, options?: { fraction?: number }): void;
  /** Clears the line (a final message may replace it). */
  finish(message?: string): void;
}

const SILENT: Progress = { update() {}, finish() {} };

export function createProgress(options: ProgressOptions): Progress {
  const enabled = options.enabled ?? options.stream.isTTY === true;
  if (!enabled) return SILENT;
  const now = options.now ?? (() => performance.now());
  const everyMs = options.everyMs ?? 250;
  const started = now();
  let lastDraw = Number.NEGATIVE_INFINITY;
  let drawn = false;
  return {
    update(count, extra) {
      const time = now();
      const fraction = extra?.fraction ?? (options.total ? count / options.total : undefined);
      // The last step is always drawn: a bar left at 85% reads as work that never finished.
      const done = fraction !== undefined && fraction >= 1;
      if (time - lastDraw < everyMs && !done) return;
      lastDraw = time;
      options.stream.write(`\r\x1b[2K${progressLine({ label: options.label, unit: options.unit, count, total: options.total, fraction, elapsedMs: time - started })}`);
      drawn = true;
    },
    finish(message) {
      if (drawn) options.stream.write('\r\x1b[2K');
      if (message) options.stream.write(`${message}\n`);
      drawn = false;
    },
  };
}

/** One progress line: `replay: 12,345 / 40,000 messages (31%), 1,650/s, ETA 17 s`. */
export function progressLine(state: {
  label: string;
  unit: string;
  count: number;
  total?: number | undefined;
  fraction?: number | undefined;
  elapsedMs: number;
}): string {
  const seconds = state.elapsedMs / 1000;
  const rate = seconds > 0 ? state.count / seconds : 0;
  let line = `${state.label}: ${formatCount(state.count)}${state.total ? ` / ${formatCount(state.total)}` : ''} ${state.unit}`;
  if (state.fraction !== undefined && state.fraction > 0) {
    const fraction = Math.min(state.fraction, 1);
    line += ` (${Math.floor(fraction * 100)}%)`;
    line += `, ${formatCount(Math.round(rate))}/s`;
    line += `, ETA ${formatDuration((seconds * (1 - fraction)) / fraction)}`;
  } else {
    line += `, ${formatCount(Math.round(rate))}/s`;
  }
  return line;
}

export function formatCount(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds)) return '?';
  if (seconds < 60) return `${Math.ceil(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/**
 * Whether to draw progress: `MAGPIE_PROGRESS=1` forces it on (to watch a job through a pipe),
 * `MAGPIE_PROGRESS=0` off; otherwise only when the stream is a terminal.
 */
export function progressEnabled(stream: NodeJS.WritableStream & { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  const forced = env.MAGPIE_PROGRESS?.trim();
  if (forced === '1') return true;
  if (forced === '0') return false;
  return stream.isTTY === true;
}
