import path from 'node:path';
import { isSchemaName, SCHEMA_NAME_RULE } from '../../common/schema-name.js';
import { closestMatch } from '../../config/edit-distance.js';
import { loadConfig } from '../../config/load-config.js';
import { migrateToPostgres, type MigratePhase, type MigrateResult } from '../../migrate/index.js';
import { UnsetVariableError } from '../../config/problems.js';
import { postgresUrl, storageTarget } from '../../storage/open-storage.js';
import { redactUrl } from '../../storage/postgres/pg-error.js';
import { EXIT, type CliCommand, type CliIo } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { parseFlags, requireFlag, UsageError } from '../parse-flags.js';
import { createProgress, formatCount, progressEnabled, type Progress } from '../progress.js';
import { jsonLine } from '../json-output.js';

const USAGE = `Usage: magpie migrate --to postgres [--data-dir DIR] [--schema NAME] [--config FILE] [--force] [--json]

Copies a SQLite data dir into PostgreSQL: every table and every row (history, summaries,
archive, memories, vectors, compaction log, personas, privacy records) with its ids. The target
is the database whose URL is in the variable [storage] url_env names (default
MAGPIE_DATABASE_URL), schema [storage] schema; it is created and migrated if missing. The data
dir of a sharded bot (its shard-<N> dirs) goes whole into the one schema.

The copy is ONE transaction, verified before it commits (row counts of every table; checksums
of messages, memory items and vectors, each side computed on its own): a failure, a mismatch,
Ctrl-C or a killed process leaves the target's data untouched (a schema created by this run
keeps only Magpie's empty tables). Meanwhile the data dir is held under its writer lock (stop
the bot first), and so is the target, under the PostgreSQL writer lock of every shard it knows.
The data dir is only read; its vector index files stay valid for a process that runs on
PostgreSQL with the same data dir.

Options:
  --to postgres    the target store (the only one)
  --data-dir DIR   the SQLite data dir (default: $MAGPIE_DATA_DIR, else [memory] data_dir)
  --schema NAME    target schema (default: $MAGPIE_STORAGE_SCHEMA, else [storage] schema)
  --config FILE    config file (default ./config.toml if present, else defaults)
  --force          replace the Magpie data the target schema holds already (otherwise refused)
  --json           the summary as one JSON object
  -h, --help       show this help

A target that holds Magpie data is refused: two deployments' ids and histories do not merge
without choices nobody should make by accident. --force replaces it, in the same transaction.
Shards: the first data dir keeps its ids; each further shard dir's numeric ids (mem-N and msg-N
memory ids, summary, compaction log and vector ids) are moved past the previous ones, and its
vector indexes are rebuilt on first use. A channel with data in two shard dirs is refused.

Exit codes: 0 copied and verified; 1 refused, failed or a mismatch (nothing committed);
2 bad usage; 3 invalid config, or no URL in the variable [storage] url_env names. Progress
goes to stderr when it is a terminal.

Afterwards: set [storage] backend = "postgres" (or MAGPIE_STORAGE_BACKEND=postgres) and start
each process with the same data dir (it keeps the index files).
`;

const TARGETS = ['postgres'];

export const migrateCommand: CliCommand = {
  name: 'migrate',
  summary: COMMAND_SUMMARIES.migrate,
  async run(argv, io) {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: {
        to: { type: 'string' },
        'data-dir': { type: 'string' },
        schema: { type: 'string' },
        config: { type: 'string' },
        force: { type: 'boolean' },
        json: { type: 'boolean' },
      },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const to = requireFlag(parsed.values.to, '--to', USAGE);
    if (!TARGETS.includes(to)) {
      const guess = closestMatch(to, TARGETS) ?? (/^(pg|postgresql)$/i.test(to) ? 'postgres' : undefined);
      throw new UsageError(`--to must be 'postgres', got '${to}'${guess === undefined ? '' : `; did you mean '${guess}'?`}`, USAGE);
    }
    const schemaFlag = parsed.values.schema;
    if (schemaFlag !== undefined && !isSchemaName(schemaFlag)) {
      throw new UsageError(`--schema needs a plain identifier (${SCHEMA_NAME_RULE}), got '${schemaFlag}'`, USAGE);
    }
    const { config } = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env });
    const dataDir = path.resolve(io.cwd, parsed.values['data-dir'] ?? config.memory.dataDir);
    const storage = { ...config.storage, backend: 'postgres' as const, ...(schemaFlag === undefined ? {} : { schema: schemaFlag }) };
    if (postgresUrl(storage, io.env) === undefined) {
      // The config may well say sqlite (it still does before the move): the URL is wanted for
      // --to postgres, not for [storage] backend, and the message says so.
      throw new UnsetVariableError(storage.urlEnv, `--to postgres needs the target database's connection URL in ${storage.urlEnv}, which is not set`, {
        hint: `export ${storage.urlEnv}=postgres://user@host:5432/database and run again (the variable's name is [storage] url_env)`,
      });
    }
    const target = storageTarget({ storage }, dataDir, io.env);
    if (target.backend !== 'postgres') throw new Error('unreachable: the target is PostgreSQL');

    const meter = phaseMeter(io);
    const where = `${redactUrl(target.url)} schema ${target.schema}`;
    // The copy is one transaction: stopped before its COMMIT, the connection closes, PostgreSQL
    // rolls it back and the target is as it was. Saying so is all there is to do. Stopped while
    // the COMMIT is on its way, the outcome is the server's; after it, only the statistics pass
    // that follows is cut short, and the copy stands.
    let commit: 'before' | 'committing' | 'committed' = 'before';
    const interrupted = (signal: NodeJS.Signals, code: number) => () => {
      meter.finish();
      if (commit === 'committed') {
        io.stderr.write(`magpie migrate: stopped by ${signal} after the copy was committed to ${where}; only the statistics pass after it was cut short (autovacuum will redo it)\n`);
        process.exit(EXIT.ok);
      }
      io.stderr.write(
        commit === 'committing'
          ? `magpie migrate: stopped by ${signal} while committing to ${where}: whether the copy is there is up to the server; run the same command again, which refuses a target that is no longer empty\n`
          : `magpie migrate: stopped by ${signal}; nothing was committed to ${where} (the copy is one transaction), and ${dataDir} is unchanged\n`,
      );
      process.exit(code);
    };
    const onInt = interrupted('SIGINT', 130);
    const onTerm = interrupted('SIGTERM', 143);
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onTerm);
    let result: MigrateResult;
    try {
      result = await migrateToPostgres({
        dataDir,
        target,
        force: parsed.values.force === true,
        onProgress: meter.update,
        onCommit: (state) => {
          commit = state;
        },
      });
    } finally {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      meter.finish();
    }
    if (parsed.values.json) io.stdout.write(jsonLine({ data_dir: dataDir, target: where, ...result }));
    else io.stdout.write(readableSummary(dataDir, where, result));
    if (!result.committed) {
      io.stderr.write(`magpie migrate: the copy in ${where} does not match ${dataDir}; nothing was committed\n`);
      return EXIT.failure;
    }
    return EXIT.ok;
  },
};

/** Progress on stderr, one meter per phase (rows copied, indexes built). */
function phaseMeter(io: CliIo): { update: (phase: MigratePhase, done: number, total: number) => void; finish: () => void } {
  const enabled = progressEnabled(io.stderr, io.env);
  let current: { phase: MigratePhase; progress: Progress } | undefined;
  const units: Record<MigratePhase, string> = { copy: 'rows', indexes: 'indexes', verify: 'checks' };
  return {
    update(phase, done, total) {
      if (current?.phase !== phase) {
        current?.progress.finish();
        const label = phase === 'copy' ? 'migrate' : phase === 'indexes' ? 'building indexes' : 'verifying';
        current = { phase, progress: createProgress({ stream: io.stderr, label, unit: units[phase], total, enabled }) };
      }
      current.progress.update(done, { fraction: total > 0 ? done / total : 1 });
    },
    finish() {
      current?.progress.finish();
    },
  };
}

function readableSummary(dataDir: string, where: string, result: MigrateResult): string {
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const rate = result.copyMs > 0 ? formatCount((result.rows / result.copyMs) * 1000) : '?';
  const lines = [
    `${result.committed ? 'migrated' : 'NOT migrated'} ${dataDir} into ${where}: ${formatCount(result.rows)} rows in ${result.tables.length} tables, ${seconds(result.durationMs)} ` +
      `(copy ${seconds(result.copyMs)}, ${rate} rows/s; indexes ${seconds(result.indexesMs)}; verification ${seconds(result.verifyMs)})`,
  ];
  if (result.replaced.length > 0) lines.push(`  replaced the data the schema held (${result.replaced.join(', ')})`);
  if (result.sources.length > 1 || result.sources[0]?.shardId !== undefined) {
    for (const source of result.sources) {
      const moved = Object.entries(source.offsets).filter(([, offset]) => offset !== '0');
      const name = source.shardId === undefined ? source.dir : `shard-${source.shardId}`;
      lines.push(
        moved.length === 0
          ? `  ${name}: ids kept`
          : `  ${name}: ids moved up by ${moved.map(([table, offset]) => `${table} +${offset}`).join(', ')}; its vector indexes are rebuilt on first use`,
      );
    }
  }
  const width = Math.max(...result.verification.counts.map((count) => count.table.length));
  for (const count of result.verification.counts) {
    const mark = count.expected === count.actual ? '' : `   MISMATCH: expected ${formatCount(count.expected)}`;
    lines.push(`  ${count.table.padEnd(width)}  ${formatCount(count.actual).padStart(12)}${mark}`);
  }
  for (const checksum of result.verification.checksums) {
    if (checksum.expected !== checksum.actual) lines.push(`  MISMATCH: checksum of ${checksum.label} (${checksum.table}) differs`);
  }
  for (const sequence of result.verification.sequences) {
    if (sequence.expected !== sequence.actual) lines.push(`  MISMATCH: id sequence of ${sequence.table} at ${sequence.actual}, expected ${sequence.expected}`);
  }
  if (result.verification.ok) {
    const checked = result.verification.checksums.map((checksum) => `${formatCount(checksum.rows)} ${checksum.label}`).join(', ');
    lines.push(`verified: row counts of ${result.verification.counts.length} tables; checksums of ${checked}; ${result.verification.sequences.length} id sequences`);
    lines.push('next: set [storage] backend = "postgres" (or MAGPIE_STORAGE_BACKEND=postgres) and start with the same data dir, which keeps the index files');
  }
  return `${lines.join('\n')}\n`;
}
