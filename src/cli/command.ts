import type { Readable, Writable } from 'node:stream';

/** What a command may touch of the process; tests hand in their own streams. */
export interface CliIo {
  stdout: Writable;
  stderr: Writable;
  stdin: Readable;
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/** Points `start` and `export` at another Discord API base (a proxy, or a fake one in tests). */
export const DISCORD_API_ENV = 'MAGPIE_DISCORD_API';

/** Exit codes shared by every command. */
export const EXIT = {
  ok: 0,
  /** The command ran and failed (a problem found, a runtime error). */
  failure: 1,
  /** Bad flags or arguments: usage was printed. */
  usage: 2,
  /** The config file is invalid. */
  config: 3,
} as const;

/**
 * One top-level command (`start`, `chat`, `replay`, `memory`, `config`). It parses its own
 * arguments (node:util parseArgs, strict), answers `--help`, and returns an exit code.
 */
export interface CliCommand {
  name: string;
  /** One line for `magpie --help`. */
  summary: string;
  run(argv: string[], io: CliIo): Promise<number>;
}
