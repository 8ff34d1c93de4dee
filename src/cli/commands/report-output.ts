import { renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { InputError, MagpieError } from '../../common/errors.js';
import { mergeRuns, renderReport, runFromDatabase, runLabels, type ReportRun } from '../../report/index.js';
import type { SqlClient } from '../../storage/sql-client.js';
import { ALL_MIGRATIONS } from '../../app/migrations.js';
import { openStorageForReading, type OpenedStorage, type StorageTarget } from '../../storage/open-storage.js';
import { DATABASE_FILE } from '../../storage/database.js';
import { listDataDirs } from '../../storage/shard-dirs.js';
import { storageError } from '../../storage/storage-error.js';
import type { CliIo } from '../command.js';
import { createProgress, progressEnabled } from '../progress.js';

/** A data dir to draw, or one already open (the replay that just ran). */
export interface ReportSource {
  dataDir: string;
  db?: SqlClient;
  /**
   * Where its data lives: the stores of the deployment (one, or one per shard). Default: the
   * SQLite database of `dataDir`, else of its `shard-<N>` dirs.
   */
  targets?: readonly StorageTarget[];
}

/**
 * Reads each source's compaction log (opening compared data dirs read-only), renders the
 * report and writes it atomically. Shared by `magpie report` and `magpie replay --report`.
 */
export async function writeReport(options: { sources: readonly ReportSource[]; channelId?: string; out: string; io: CliIo }): Promise<ReportRun[]> {
  const { io } = options;
  // Checked again (the callers check it before their work): the directory may have gone since.
  const out = checkReportOut(options.out, io.cwd, '--out');
  const labels = runLabels(options.sources.map((source) => source.dataDir));
  const progress = createProgress({ stream: io.stderr, label: 'report', unit: 'data dirs', total: options.sources.length, everyMs: 0, enabled: progressEnabled(io.stderr, io.env) });
  const runs: ReportRun[] = [];
  for (const [index, source] of options.sources.entries()) {
    progress.update(index);
    const read = (db: SqlClient, label: string, from: string) =>
      runFromDatabase(db, { label, source: from, ...(options.channelId === undefined ? {} : { channelId: options.channelId }) });
    if (source.db) {
      runs.push(await read(source.db, labels[index]!, source.dataDir));
      continue;
    }
    const targets = source.targets ?? sqliteTargets(source.dataDir);
    const parts: ReportRun[] = [];
    for (const target of targets) {
      const opened = await openSource(source.dataDir, target, index > 0);
      try {
        parts.push(await read(opened.db, labels[index]!, source.dataDir));
      } catch (error) {
        throw storageError(target.dataDir, error) ?? error;
      } finally {
        await opened.close();
      }
    }
    runs.push(parts.length === 1 ? parts[0]! : mergeRuns(parts, { label: labels[index]!, source: `${source.dataDir} (${targets.map((target) => path.basename(target.dataDir)).join(', ')})` }));
  }
  progress.update(options.sources.length);
  progress.finish();
  const html = renderReport(runs, { generatedAt: new Date() });
  if (out === '-') {
    io.stdout.write(html);
    return runs;
  }
  const temporary = `${out}.tmp-${process.pid}`;
  try {
    writeFileSync(temporary, html);
    renameSync(temporary, out);
  } catch (error) {
    // A report that could not be put in place leaves nothing behind, not a stray temp file.
    rmSync(temporary, { force: true });
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
 * a new tree somewhere: it has to exist; and the name must not be a directory already. Called
 * before long work, so a replay is not run for a report that cannot be written.
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
  if (isDirectory(resolved)) {
    throw new InputError(`cannot write the report to ${resolved}: it is a directory`, {
      hint: `give ${flag} a file name, such as ${path.join(out, 'report.html')}`,
    });
  }
  return resolved;
}

/**
 * The `--compare` data dirs, each checked to hold Magpie data (itself or its `shard-<N>` dirs)
 * before any work: a mistyped one must not be found only after a whole replay.
 */
export function checkCompareDirs(dirs: readonly string[], cwd: string): string[] {
  return dirs.map((dir) => {
    const resolved = path.resolve(cwd, dir);
    if (listDataDirs(resolved).length === 0) {
      throw new InputError(`--compare ${resolved}: no Magpie data there (${DATABASE_FILE} not found, nor shard-<N> dirs holding one)`, {
        hint: 'check the --compare path: each --compare names a data directory written by magpie replay (or start, chat)',
      });
    }
    return resolved;
  });
}

function isDirectory(directory: string): boolean {
  try {
    return statSync(directory).isDirectory();
  } catch {
    return false;
  }
}

/** A data dir's SQLite stores: its own database, else those of its shard dirs (else itself, to be refused as empty). */
function sqliteTargets(dataDir: string): StorageTarget[] {
  const entries = listDataDirs(dataDir);
  return entries.length === 0 ? [{ backend: 'sqlite', dataDir }] : entries.map((entry) => ({ backend: 'sqlite', dataDir: entry.dir }));
}

/**
 * Opens a store read-only. A compared one (`--compare DIR`) that is not a data dir says so in
 * terms of --compare: the store's own hint speaks of --data-dir, which is not what was mistyped.
 * A damaged database says so and how to restore it, as every command does.
 */
async function openSource(dataDir: string, target: StorageTarget, compared: boolean): Promise<OpenedStorage> {
  try {
    return await openStorageForReading(target, ALL_MIGRATIONS, { command: 'magpie report', anyVersion: true });
  } catch (error) {
    const problem = storageError(target.dataDir, error);
    if (problem) throw problem;
    if (!compared || !(error instanceof MagpieError)) throw error;
    throw new MagpieError(error.code, `--compare ${dataDir}: ${error.message}`, {
      cause: error,
      context: { ...error.context, compare: dataDir },
      hint: 'check the --compare path: each --compare names a data directory written by magpie replay (or start, chat)',
    });
  }
}
