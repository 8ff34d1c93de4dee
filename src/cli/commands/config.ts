import path from 'node:path';
import { EXIT, type CliCommand, type CliIo } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { checkConfigText, DEFAULT_CONFIG_FILE, readConfigBytes } from '../../config/load-config.js';
import { ConfigError, formatProblem } from '../../config/problems.js';
import { parseFlags, unknownSubcommand, UsageError } from '../parse-flags.js';

const USAGE = `Usage: magpie config check [FILE]

Validate a config file (default: ./${DEFAULT_CONFIG_FILE}) and print every problem by key path.

Exit codes: 0 valid, 3 invalid or unreadable, 2 bad usage.
`;

const CHECK_USAGE = `Usage: magpie config check [FILE]

Validate FILE (default: ./${DEFAULT_CONFIG_FILE}): TOML syntax, types, ranges, unknown keys,
threshold order (0 < background < aggressive < emergency <= 1, per channel too), secrets
written in the file. Prints "config OK: FILE" or every problem as "key.path: message (line N)".

Exit codes: 0 valid, 3 invalid or unreadable, 2 bad usage.
`;

export const configCommand: CliCommand = {
  name: 'config',
  summary: COMMAND_SUMMARIES.config,
  async run(argv, io) {
    const [subcommand, ...rest] = argv;
    if (subcommand === undefined || subcommand === '--help' || subcommand === '-h') {
      const parsed = parseFlags(argv, { usage: USAGE, options: {} });
      if (parsed.help) {
        io.stdout.write(USAGE);
        return EXIT.ok;
      }
      throw new UsageError('missing subcommand', USAGE);
    }
    if (subcommand !== 'check') throw unknownSubcommand(subcommand, ['check'], USAGE);
    return checkCommand(rest, io);
  },
};

function checkCommand(argv: string[], io: CliIo): number {
  const parsed = parseFlags(argv, { usage: CHECK_USAGE, options: {}, positionals: { max: 1 } });
  if (parsed.help) {
    io.stdout.write(CHECK_USAGE);
    return EXIT.ok;
  }
  const named = parsed.positionals[0];
  if (named !== undefined && named.trim() === '') {
    // `config check "$UNSET"`: resolved, '' is the working directory, and EISDIR says nothing useful.
    throw new ConfigError('FILE', [{ path: '', message: 'the config file path is empty' }]);
  }
  const file = path.resolve(io.cwd, named ?? DEFAULT_CONFIG_FILE);
  const shown = named ?? `./${DEFAULT_CONFIG_FILE}`;
  // The loader's own reading, so a file start would refuse (a named file that is missing, a
  // broken link, no permission) is refused here in the same words, through the CLI's boundary.
  // Bytes, not text: checkConfigText refuses a file that is not UTF-8 instead of replacing its bytes.
  const text = readConfigBytes(file, { mustExist: named !== undefined, source: shown });
  if (text === undefined) {
    // Same rule as start: no config file at all means every default applies.
    io.stdout.write(`config OK: no ${shown}; every built-in default applies\n`);
    return EXIT.ok;
  }
  // The check is about the file, so environment overrides are left out on purpose.
  const result = checkConfigText(text, { source: shown });
  if (result.ok) {
    io.stdout.write(`config OK: ${shown}\n`);
    return EXIT.ok;
  }
  const count = result.problems.length === 1 ? '1 problem' : `${result.problems.length} problems`;
  io.stderr.write(`${shown}: ${count}\n`);
  for (const problem of result.problems) {
    const [first, ...more] = formatProblem(problem).split('\n');
    io.stderr.write(`  ${first}\n${more.map((line) => `    ${line}\n`).join('')}`);
  }
  return EXIT.config;
}
