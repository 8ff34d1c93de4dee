import { MagpieError, InputError } from '../common/errors.js';
import { closestMatch } from '../config/edit-distance.js';
import { ConfigError } from '../config/problems.js';
import { EXIT, type CliCommand, type CliIo } from './command.js';
import { chatCommand } from './commands/chat.js';
import { configCommand } from './commands/config.js';
import { memoryCommand } from './commands/memory.js';
import { replayCommand } from './commands/replay.js';
import { startCommand } from './commands/start.js';
import { UsageError } from './parse-flags.js';
import { readPackageVersion } from './package-version.js';

/** The top-level commands, in the order `magpie --help` lists them. */
export const COMMANDS: readonly CliCommand[] = [startCommand, chatCommand, replayCommand, memoryCommand, configCommand];

/** `magpie --help`: every command with its one-line summary. */
export function topLevelUsage(commands: readonly CliCommand[] = COMMANDS): string {
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
 * `UsageError` → message + usage, 2; `ConfigError` → every problem, 3; other `InputError` → 2;
 * other `MagpieError` → its rendered text, 1. Only an unexpected error shows a stack trace.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    // `magpie help config` is a friendly alias for `magpie config --help`.
    const topic = name === 'help' ? COMMANDS.find((command) => command.name === rest[0]) : undefined;
    if (topic) return runCommand(topic, ['--help'], io);
    (name === undefined ? io.stderr : io.stdout).write(topLevelUsage());
    return name === undefined ? EXIT.usage : EXIT.ok;
  }
  if (name === '--version' || name === '-v') {
    io.stdout.write(`${readPackageVersion()}\n`);
    return EXIT.ok;
  }
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (!command) {
    const guess = closestMatch(name, COMMANDS.map((candidate) => candidate.name));
    const hint = guess === undefined ? '' : ` (did you mean '${guess}'?)`;
    const what = name.startsWith('-') ? `unknown option '${name}'` : `unknown command '${name}'${hint}`;
    io.stderr.write(`magpie: ${what}\n\n${topLevelUsage()}`);
    return EXIT.usage;
  }
  return runCommand(command, rest, io);
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
  const prefix = `magpie ${commandName}: `;
  if (error instanceof UsageError) {
    io.stderr.write(`${prefix}${error.render()}\n`);
    return EXIT.usage;
  }
  if (error instanceof ConfigError) {
    io.stderr.write(`${prefix}${error.render()}\n`);
    return EXIT.config;
  }
  if (error instanceof MagpieError) {
    io.stderr.write(`${prefix}${error.render()}\n`);
    return error instanceof InputError ? EXIT.usage : EXIT.failure;
  }
  const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
  io.stderr.write(`${prefix}unexpected error: ${detail}\n`);
  return EXIT.failure;
}
