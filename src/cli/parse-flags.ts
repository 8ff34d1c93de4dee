import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InputError } from '../common/errors.js';
import { closestMatch, didYouMean } from '../config/edit-distance.js';

/**
 * Bad flags or arguments. The CLI prints the message and then `usage`, and exits 2
 * (`EXIT.usage`). Throw it from a command (or let `parseFlags` throw it) instead of printing
 * usage by hand.
 */
export class UsageError extends InputError {
  override name = 'UsageError';
  /** The command's full usage text, printed after the message. */
  readonly usage: string;

  constructor(message: string, usage: string) {
    super(message);
    this.usage = usage;
  }

  /** The message, the command's usage line(s), and where the whole help is: not the whole help. */
  override render(): string {
    return `${this.message}\n\n${usageLines(this.usage)}\n${fullHelpPointer(this.usage)}`;
  }
}

/** The `Usage:` line of a help text, with the alternative forms indented under it. */
export function usageLines(usage: string): string {
  const lines = usage.split('\n');
  const first = lines.findIndex((line) => line.startsWith('Usage:'));
  if (first < 0) return lines[0] ?? '';
  const kept = [lines[first]!];
  for (const line of lines.slice(first + 1)) {
    if (!/^\s+magpie\b/.test(line)) break;
    kept.push(line);
  }
  return kept.join('\n');
}

/** "Run 'magpie memory forget --help' for every option." for the command a usage text describes. */
export function fullHelpPointer(usage: string): string {
  const words = (usageLines(usage).split('\n')[0] ?? '').replace(/^Usage:\s*/, '').split(/\s+/);
  const command: string[] = [];
  for (const word of words) {
    if (!/^[a-z][a-z-]*$/.test(word)) break;
    command.push(word);
  }
  return `Run '${command.join(' ') || 'magpie'} --help' for every option.`;
}

type FlagOptions = NonNullable<ParseArgsConfig['options']>;

/** The parser configuration `parseFlags` builds, so results are typed from your options. */
type StrictConfig<Options extends FlagOptions> = {
  args: string[];
  options: Options & { help: { type: 'boolean'; short: 'h' } };
  allowPositionals: true;
  strict: true;
};

export interface FlagSpec<Options extends FlagOptions> {
  /** Full usage text of the command (printed for `--help` and after a usage error). */
  usage: string;
  /** node:util parseArgs options. `--help`/`-h` is added for you. */
  options: Options;
  /** Fewest and most positional arguments accepted (default 0 and 0). Ignored with --help. */
  positionals?: { min?: number; max?: number };
}

export interface ParsedFlags<Options extends FlagOptions> {
  /** True when `--help`/`-h` was given: print `usage` to stdout and return `EXIT.ok`. */
  help: boolean;
  values: ReturnType<typeof parseArgs<StrictConfig<Options>>>['values'];
  positionals: string[];
}

/**
 * The shared argument parser of every `magpie` command: node:util `parseArgs` in strict mode,
 * plus `--help`, positional counts and usage errors.
 *
 * An unknown flag, a missing flag value, or too few/many positionals throws a `UsageError`;
 * `magpie`'s dispatcher prints it with the usage text and exits 2, so a command just lets it
 * propagate. Typical use inside `run(argv, io)`:
 *
 * ```ts
 * const USAGE = 'Usage: magpie replay TRANSCRIPT.jsonl --data-dir DIR [--json]\n...';
 * const parsed = parseFlags(argv, {
 *   usage: USAGE,
 *   options: { 'data-dir': { type: 'string' }, json: { type: 'boolean' } },
 *   positionals: { min: 1, max: 1 },
 * });
 * if (parsed.help) { io.stdout.write(USAGE); return EXIT.ok; }
 * const dataDir = requireFlag(parsed.values['data-dir'], '--data-dir', USAGE);
 * const lag = integerFlag(parsed.values['worker-lag'], '--worker-lag', USAGE, { min: 0 });
 * ```
 */
export function parseFlags<const Options extends FlagOptions>(
  argv: readonly string[],
  spec: FlagSpec<Options>,
): ParsedFlags<Options> {
  const config = {
    args: withNegativeValues(argv, spec.options),
    options: { ...spec.options, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
    strict: true,
  } as StrictConfig<Options>;
  let parsed: ReturnType<typeof parseArgs<StrictConfig<Options>>>;
  try {
    parsed = parseArgs(config);
  } catch (error) {
    let message = cleanParseError(error);
    const guess = message.startsWith('unknown option') ? closestFlag(message, Object.keys(config.options)) : undefined;
    if (guess !== undefined) message += `; did you mean '${guess}'?`;
    else if (message.startsWith('unknown option') && (spec.positionals?.max ?? 0) > 0) {
      // A query or file name may start with a dash ("-5 degrees"): say how to pass it.
      message += "; to pass an argument that starts with '-', put it last, after '--'";
    }
    throw new UsageError(message, spec.usage);
  }
  const help = (parsed.values as { help?: boolean }).help === true;
  if (!help) {
    const min = spec.positionals?.min ?? 0;
    const max = spec.positionals?.max ?? 0;
    const count = parsed.positionals.length;
    if (count > max) {
      const extra = parsed.positionals.slice(max).map((value) => `'${value}'`).join(', ');
      throw new UsageError(`unexpected argument${count - max === 1 ? '' : 's'}: ${extra}`, spec.usage);
    }
    if (count < min) throw new UsageError(`missing argument${min - count === 1 ? '' : 's'}`, spec.usage);
  }
  return { help, values: parsed.values, positionals: parsed.positionals };
}

/**
 * `--worker-lag -1` as `--worker-lag=-1`: node takes a value starting with a dash for an option
 * and reports the flag's value as "ambiguous"; a negative number is plainly the value, and the
 * flag's own check then says what range it needs.
 */
function withNegativeValues(argv: readonly string[], options: FlagOptions): string[] {
  const args: string[] = [];
  for (let index = 0; index < argv.length; index += 1) {
    const arg = argv[index]!;
    const next = argv[index + 1];
    if (arg === '--') return [...args, ...argv.slice(index)];
    if (arg.startsWith('--') && options[arg.slice(2)]?.type === 'string' && next !== undefined && /^-\d+(\.\d+)?$/.test(next)) {
      args.push(`${arg}=${next}`);
      index += 1;
    } else args.push(arg);
  }
  return args;
}

/** A flag the command cannot do without: returns it or throws a `UsageError`. */
export function requireFlag<T>(value: T | undefined, flag: string, usage: string): T {
  if (value === undefined || value === '') throw new UsageError(`missing required option ${flag}`, usage);
  return value;
}

/**
 * Parses an integer flag value (`--limit 5`). Undefined stays undefined (use `?? default`);
 * anything that is not a whole number within bounds throws a `UsageError`. Without a `max`, the
 * bound is the largest whole number a double holds exactly, and a value past it is told so: "of
 * at least 1" alone would contradict a value that is plainly more than 1.
 */
export function integerFlag(
  value: string | undefined,
  flag: string,
  usage: string,
  bounds: { min?: number; max?: number } = {},
): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  const number = /^-?\d+$/.test(text) ? Number(text) : Number.NaN;
  const min = bounds.min ?? Number.MIN_SAFE_INTEGER;
  const max = bounds.max ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(number) || number < min || number > max) {
    // Digits past the upper bound (even past what a double holds): name that bound.
    const tooLarge = /^\d+$/.test(text) && (!Number.isSafeInteger(number) || number > max);
    throw new UsageError(`${flag} needs a whole number${rangeText(bounds, tooLarge)}, got '${shortValue(value)}'`, usage);
  }
  return number;
}

function rangeText(bounds: { min?: number; max?: number }, tooLarge: boolean): string {
  const max = bounds.max ?? Number.MAX_SAFE_INTEGER;
  if (bounds.min !== undefined && bounds.max !== undefined) return ` between ${bounds.min} and ${bounds.max}`;
  if (bounds.min !== undefined) return tooLarge ? ` of at least ${bounds.min} and at most ${max}` : ` of at least ${bounds.min}`;
  if (bounds.max !== undefined || tooLarge) return ` of at most ${max}`;
  return '';
}

/** A pasted value of hundreds of characters would push the message off the screen. */
function shortValue(value: string): string {
  return value.length > 40 ? `${value.slice(0, 40)}… (${value.length} characters)` : value;
}

/** `--chanel` → `--channel`: the known flag a mistyped one most likely meant. */
function closestFlag(message: string, names: readonly string[]): string | undefined {
  const typed = /'(-{1,2})([^'=]+)'/.exec(message);
  if (!typed || typed[1] !== '--') return undefined;
  const match = closestMatch(typed[2]!, names);
  return match === undefined ? undefined : `--${match}`;
}

/** node's messages carry a "To specify a positional argument..." tail that confuses here. */
function cleanParseError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('. To specify')[0]!.replace(/^Unknown option/, 'unknown option').replace(/^Option/, 'option');
}

/**
 * The subcommand a dispatcher (`magpie memory`, `magpie config`) was given but does not have,
 * as a usage error naming the closest one. A word starting with a dash is an option, not a
 * subcommand: `--hepl` is compared with `--help` (the one option a dispatcher has).
 */
export function unknownSubcommand(given: string, known: readonly string[], usage: string): UsageError {
  if (given.startsWith('-')) {
    const guess = given.startsWith('--') ? closestMatch(given.slice(2), ['help']) : undefined;
    const hint = guess === undefined ? `; give a subcommand first (${known.join(', ')}), or --help` : `; did you mean '--${guess}'?`;
    return new UsageError(`unknown option '${given}'${hint}`, usage);
  }
  return new UsageError(`unknown subcommand '${given}'${didYouMean(given, known)}`, usage);
}
