import { MagpieError, InputError } from '../common/errors.js';
import { closestMatch } from '../config/edit-distance.js';
import { ConfigError, UnsetVariableError } from '../config/problems.js';
import { scrubSecrets, secretValuesFrom } from '../logging/scrub-secrets.js';
import { EXIT, type CliCommand, type CliIo } from './command.js';
import { UsageError } from './parse-flags.js';
import { PgError } from '../storage/postgres/pg-error.js';
import { storageError } from '../storage/storage-error.js';
import { readPackageVersion } from './package-version.js';
import { terminalSafeLines } from './terminal-text.js';
import { COMMAND_SUMMARIES } from './command-summaries.js';

/**
 * The top-level commands (the same names as COMMAND_SUMMARIES, whose order the help follows).
 * Each is imported only when it runs: `start` pulls in discord.js and the store, which
 * `config check` (and every script that calls it) should not pay for.
 */
export const COMMAND_LOADERS: ReadonlyMap<string, () => Promise<CliCommand>> = new Map([
  ['start', async () => (await import('./commands/start.js')).startCommand],
  ['chat', async () => (await import('./commands/chat.js')).chatCommand],
  ['replay', async () => (await import('./commands/replay.js')).replayCommand],
  ['memory', async () => (await import('./commands/memory.js')).memoryCommand],
  ['config', async () => (await import('./commands/config.js')).configCommand],
  ['status', async () => (await import('./commands/status.js')).statusCommand],
  ['report', async () => (await import('./commands/report.js')).reportCommand],
  ['export', async () => (await import('./commands/export.js')).exportCommand],
  ['migrate', async () => (await import('./commands/migrate.js')).migrateCommand],
]);

/** Loads one command; if its module cannot be imported, a stand-in that reports why when run. */
async function loadCommand(name: string): Promise<CliCommand> {
  try {
    return await COMMAND_LOADERS.get(name)!();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { name, summary: `(cannot be loaded: ${reason})`, run: () => Promise.reject(error) };
  }
}

/** `magpie --help`: every command with its one-line summary (no command is loaded for it). */
export function topLevelUsage(): string {
  const commands = Object.entries(COMMAND_SUMMARIES).map(([name, summary]) => ({ name, summary }));
  const width = Math.max(...commands.map((command) => command.name.length));
  return [
    'Usage: magpie <command> [options]',
    '',
    'Magpie is a Discord channel bot that never runs out of context.',
    '',
    'Commands:',
    ...commands.map((command) => `  ${command.name.padEnd(width)}  ${command.summary}`),
    '',
    'Options:',
    '  -h, --help     show this help (or a command\'s: magpie <command> --help)',
    '  -v, --version  print the version',
    '',
    'Exit codes: 0 ok, 1 failure, 2 bad usage, 3 invalid config.',
    '',
  ].join('\n');
}

/**
 * Dispatches `magpie <command> ...` and turns whatever a command throws into an exit code:
 * `UsageError` → message + usage, 2; `ConfigError` → every problem, 3; `UnsetVariableError`
 * (a variable the config needs, such as the PostgreSQL URL) → 3; other `InputError` → 2;
 * other `MagpieError` → its rendered text, 1. Only an unexpected error shows a stack trace.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === 'help' && rest[0] !== undefined && !COMMAND_LOADERS.has(rest[0])) {
    // `magpie help frobnicate`: the same answer as `magpie frobnicate`, not a silent success.
    return runCli(rest, io);
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    // `magpie help config` is a friendly alias for `magpie config --help`.
    const topic = name === 'help' && rest[0] !== undefined && COMMAND_LOADERS.has(rest[0]) ? rest[0] : undefined;
    if (topic !== undefined) return runCommand(await loadCommand(topic), ['--help'], io);
    (name === undefined ? io.stderr : io.stdout).write(topLevelUsage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === '-v') {
    io.stdout.write(`${readPackageVersion()}\n`);
    return EXIT.ok;
  }
  if (!COMMAND_LOADERS.has(name)) {
    const guess = closestMatch(name, COMMAND_LOADERS.keys());
    const hint = guess === undefined ? '' : ` (did you mean '${guess}'?)`;
    const optionGuess = name.startsWith('--') ? closestMatch(name.slice(2), ['help', 'version']) : undefined;
    const what = name.startsWith('-')
      ? `unknown option '${name}'${optionGuess === undefined ? '' : ` (did you mean '--${optionGuess}'?)`}`
      : `unknown command '${name}'${hint}`;
    // The one usage line and where the rest is: the whole help would bury the suggestion.
    io.stderr.write(`magpie: ${what}\n\nUsage: magpie <command> [options]\nRun 'magpie --help' for the commands.\n`);
    return EXIT.usage;
  }
  return runCommand(await loadCommand(name), rest, io);
}

async function runCommand(command: CliCommand, argv: string[], io: CliIo): Promise<number> {
  try {
    return await command.run(argv, io);
  } catch (error) {
    return reportError(command.name, error, io);
  }
}

/** The one error boundary of the CLI; exported so long-running commands can reuse it. */
export function reportError(commandName: string, error: unknown, io: CliIo): number {
  const prefix = commandName === '' ? 'magpie: ' : `magpie ${commandName}: `;
  // stderr ends up in service logs: a library error that quotes the bot token or the API key
  // must not carry it there.
  const secrets = secretValuesFrom(io.env);
  // Messages may quote stored ids or a line's text: its lines are kept, escape sequences are
  // shown rather than obeyed (terminal-text.ts).
  const write = (text: string) => io.stderr.write(scrubSecrets(`${terminalSafeLines(`${prefix}${text}`)}\n`, secrets));
  if (error instanceof UsageError) {
    write(error.render());
    return EXIT.usage;
  }
  if (error instanceof ConfigError || error instanceof UnsetVariableError) {
    write(error.render());
    return EXIT.config;
  }
  if (error instanceof MagpieError) {
    write(error.render());
    return error instanceof InputError ? EXIT.usage : EXIT.failure;
  }
  if (isSystemError(error)) {
    // The file system or the network said no (a data dir that is a file, no permission, a full
    // disk): the message names the path and the reason; a stack trace would only hide them.
    write(error.message);
    return EXIT.failure;
  }
  if (isSqliteError(error)) {
    // The database said no (full disk, I/O error, locked): its code and message say what; a
    // stack trace would only hide them.
    write(`database error ${error.code}: ${error.message}\n  hint: check the data dir's disk (space, permissions) and run again`);
    return EXIT.failure;
  }
  if (error instanceof PgError) {
    // PostgreSQL said no: a dropped connection, a full disk and the like say what to do; any
    // other refusal is shown with its SQLSTATE, which is what the server's log is searched by.
    const problem = storageError('', error);
    write(problem ? problem.render() : `PostgreSQL error ${error.code ?? '(no SQLSTATE)'}: ${error.message}`);
    return EXIT.failure;
  }
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  write(`unexpected error: ${detail}`);
  return EXIT.failure;
}

function isSqliteError(error: unknown): error is Error & { code: string } {
  const code = (error as { code?: unknown } | null)?.code;
  return error instanceof Error && typeof code === 'string' && code.startsWith('SQLITE_');
}

/** A Node.js system error (`EACCES`, `ENOTDIR`, `ENOSPC`...): it has a code and a syscall. */
function isSystemError(error: unknown): error is NodeJS.ErrnoException {
  if (!(error instanceof Error)) return false;
  const candidate = error as NodeJS.ErrnoException;
  return typeof candidate.code === 'string' && /^E[A-Z]+$/.test(candidate.code) && typeof candidate.syscall === 'string';
}

/**
 * Lets a reader close the pipe early (`| head`): writes to a closed stdout or stderr are
 * dropped instead of raising an unhandled 'error' event that would end the process mid-work.
 */
export function ignoreClosedPipe(stream: NodeJS.WritableStream): void {
  stream.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE' || error.code === 'ERR_STREAM_DESTROYED') return;
    throw error;
  });
}
