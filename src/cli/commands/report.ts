import path from 'node:path';
import { loadConfig } from '../../config/load-config.js';
import { EXIT, type CliCommand } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { parseFlags, requireFlag, UsageError } from '../parse-flags.js';
import { checkCompareDirs, checkReportOut, reportWritten, writeReport } from './report-output.js';
import { listStorage } from '../../storage/open-storage.js';

const USAGE = `Usage: magpie report [--data-dir DIR] [--compare DIR]... [--channel ID] --out FILE.html

Writes a self-contained HTML tuning report from a data directory's compaction log: per
channel, a chart of context usage over the conversation with the three thresholds and a marker
at each compaction (coloured by tier), a table of what compaction did, and the settings in
force. Opens the database read-only: safe beside a running bot.

Comparing settings: replay the same transcript into two data dirs with two configs, then
  magpie report --data-dir runs/default --compare runs/aggressive --out compare.html
Every table gets a column per data dir (and a difference column for two); charts share axes.

Options:
  --data-dir DIR  data directory (default: MAGPIE_DATA_DIR, else [memory] data_dir of the config);
                  the data dir of a sharded bot is read across its shard-<N> dirs
  --compare DIR   another data directory to show beside it (repeatable, up to 4 in all)
  --channel ID    only this channel
  --out FILE      where to write the HTML ('-' for stdout)
  --config FILE   config file naming the data directory (default ./config.toml if present)
  -h, --help      show this help
`;

/** More runs than this do not fit side by side. */
export const MAX_RUNS = 4;

export const reportCommand: CliCommand = {
  name: 'report',
  summary: COMMAND_SUMMARIES.report,
  async run(argv, io) {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: {
        'data-dir': { type: 'string' },
        compare: { type: 'string', multiple: true },
        channel: { type: 'string' },
        out: { type: 'string' },
        config: { type: 'string' },
      },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const out = requireFlag(parsed.values.out, '--out', USAGE);
    const channel = parsed.values.channel;
    if (channel !== undefined && channel.trim() === '') throw new UsageError('--channel needs a channel id', USAGE);
    // Where the report goes and what it compares are checked before any data dir is read.
    checkReportOut(out, io.cwd, '--out');
    const compare = checkCompareDirs(compareDirs(parsed.values.compare, USAGE, 1), io.cwd);
    const { config } = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env });
    const dataDir = path.resolve(io.cwd, parsed.values['data-dir'] ?? config.memory.dataDir);
    // The data dir is read where [storage] says (a sharded bot's SQLite: every shard-<N> dir, as
    // status reads them); compared runs are SQLite data dirs (replays).
    const stores = listStorage(config, dataDir, io.env);
    const main = stores.length > 0 ? { dataDir, targets: stores.map((entry) => entry.target) } : { dataDir };
    const sources = [main, ...compare.map((dir) => ({ dataDir: dir }))];
    const runs = await writeReport({ sources, out, io, ...(channel === undefined ? {} : { channelId: channel }) });
    if (channel !== undefined && runs.every((run) => run.channels.length === 0)) {
      io.stderr.write(`magpie report: note: nothing is logged for channel '${channel}'\n`);
    }
    if (out !== '-') io.stderr.write(reportWritten(path.resolve(io.cwd, out), runs));
    return EXIT.ok;
  },
};

/** `--compare` values: non-empty, and not so many that the report stops being readable. */
export function compareDirs(values: string[] | undefined, usage: string, alreadyRuns: number): string[] {
  const dirs = values ?? [];
  for (const dir of dirs) if (dir.trim() === '') throw new UsageError('--compare needs a data directory', usage);
  if (dirs.length + alreadyRuns > MAX_RUNS) {
    throw new UsageError(`at most ${MAX_RUNS} runs fit in one report; got ${dirs.length + alreadyRuns}`, usage);
  }
  return dirs;
}
