import { renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { InputError, MagpieError } from '../../common/errors.js';
import { renderReport, runFromDatabase, runLabels, type ReportRun } from '../../report/index.js';
import type { SqlClient } from '../../storage/sql-client.js';
import { ALL_MIGRATIONS } from '../../app/migrations.js';
import { openStorageForReading, type OpenedStorage, type StorageTarget } from '../../storage/open-storage.js';
import type { CliIo } from '../command.js';
import { createProgress, progressEnabled } from '../progress.js';

/** A data dir to draw, or one already open (the replay that just ran). */
export interface ReportSource {
  dataDir: string;
  db?: SqlClient;
  /** Where its data lives; default the SQLite database in `dataDir`. */
  target?: StorageTarget;
}

/**
 * Reads each source's compaction log (opening compared data dirs read-only), renders the
 * report and writes it atomically. Shared by `magpie report` and `magpie replay --report`.
 */
export async function writeReport(options: { sources: readonly ReportSource[]; channelId?: string; out: string; io: CliIo }): Promise<ReportRun[]> {
  const { io } = options;
  const labels = runLabels(options.sources.map((source) => source.dataDir));
  const progress = createProgress({ stream: io.stderr, label: 'report', unit: 'data dirs', total: options.sources.length, everyMs: 0, enabled: progressEnabled(io.stderr, io.env) });
  const runs: ReportRun[] = [];
  for (const [index, source] of options.sources.entries()) {
    progress.update(index);
    const opened = source.db ? undefined : await openSource(source, index > 0);
    const db = source.db ?? opened!.db;
    try {
      runs.push(
        await runFromDatabase(db, {
          label: labels[index]!,
          source: source.dataDir,
          ...(options.channelId === undefined ? {} : { channelId: options.channelId }),
        }),
      );
    } finally {
      await opened?.close();
    }
  }
  progress.update(options.sources.length);
  progress.finish();
  const html = renderReport(runs, { generatedAt: new Date() });
  if (options.out === '-') {
    io.stdout.write(html);
    return runs;
  }
  const out = checkReportOut(options.out, io.cwd, '--out');
  try {
    const temporary = `${out}.tmp-${process.pid}`;
    writeFileSync(temporary, html);
    renameSync(temporary, out);
  } catch (error) {
    throw new InputError(`cannot write the report to ${out}: ${error instanceof Error ? error.message : String(error)}`);
  }
  return runs;
}

/** One line for stderr after writing a report. */
export function reportWritten(out: string, runs: readonly ReportRun[]): string {
  const parts = runs.map((run) => {
    const markers = run.total.summaries + run.total.emergencies;
    return `${run.label}: ${run.channels.length} channel(s), ${markers} compaction(s)`;
  });
  return `report written to ${out} (${parts.join('; ')})\n`;
}

/**
 * Where a report will be written (`-` stays `-`). A typo in the directory must not quietly create
 * a new tree somewhere: it has to exist. Called before long work, so a replay is not run for a
 * report that cannot be written.
 */
export function checkReportOut(out: string, cwd: string, flag: '--out' | '--report'): string {
  if (out === '-') return out;
  const resolved = path.resolve(cwd, out);
  const directory = path.dirname(resolved);
  if (!isDirectory(directory)) {
    throw new InputError(`cannot write the report to ${resolved}: the directory ${directory} does not exist`, {
      hint: `create it first, or give ${flag} a file in a directory that exists`,
    });
  }
  return resolved;
}

function isDirectory(directory: string): boolean {
  try {
    return statSync(directory).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Opens a source read-only. A compared one (`--compare DIR`) that is not a data dir says so in
 * terms of --compare: the store's own hint speaks of --data-dir, which is not what was mistyped.
 */
async function openSource(source: ReportSource, compared: boolean): Promise<OpenedStorage> {
  try {
    return await openStorageForReading(source.target ?? { backend: 'sqlite', dataDir: source.dataDir }, ALL_MIGRATIONS, { command: 'magpie report', anyVersion: true });
  } catch (error) {
    if (!compared || !(error instanceof MagpieError)) throw error;
    throw new MagpieError(error.code, `--compare ${source.dataDir}: ${error.message}`, {
      cause: error,
      context: { ...error.context, compare: source.dataDir },
      hint: 'check the --compare path: each --compare names a data directory written by magpie replay (or start, chat)',
    });
  }
}
