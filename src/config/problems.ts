import { InputError } from '../common/errors.js';

/** One thing wrong with a config file, named by its TOML key path (`defaults.compaction.background_threshold`). */
export interface ConfigProblem {
  /** Dotted TOML key path, snake_case as written in the file; empty for a syntax error. */
  path: string;
  message: string;
  /** 1-based line in the file, when it could be located. */
  line?: number;
  /** 1-based column, when the TOML parser reports one. */
  column?: number;
}

/** `key.path: message (line N)`: the form every problem is shown in. */
export function formatProblem(problem: ConfigProblem): string {
  const where =
    problem.line === undefined
      ? ''
      : problem.column === undefined
        ? ` (line ${problem.line})`
        : ` (line ${problem.line}, column ${problem.column})`;
  const head = problem.path === '' ? problem.message : `${problem.path}: ${problem.message}`;
  // A multi-line message (the parser's code excerpt) keeps the location on its first line.
  const [first = '', ...rest] = head.split('\n');
  return [first + where, ...rest].join('\n');
}

/**
 * A config that cannot be used. Carries every problem found, not only the first, so an operator
 * fixes the file in one pass. The CLI maps it to exit code 3 (`EXIT.config`).
 */
export class ConfigError extends InputError {
  override name = 'ConfigError';
  readonly problems: readonly ConfigProblem[];
  /** The file (or label) the text came from. */
  readonly source: string;

  constructor(source: string, problems: readonly ConfigProblem[], options: { cause?: unknown } = {}) {
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    super(`invalid config ${source}: ${count}`, {
      ...(options.cause === undefined ? {} : { cause: options.cause }),
      context: { source, problems: problems.map(formatProblem) },
      hint: 'fix the keys named above; config.toml at the top of the project lists every key with its default',
    });
    this.problems = problems;
    this.source = source;
  }

  override render(): string {
    const lines = [`${this.message}`];
    for (const problem of this.problems) {
      lines.push(...formatProblem(problem).split('\n').map((line, index) => (index === 0 ? `  - ${line}` : `    ${line}`)));
    }
    return lines.join('\n');
  }
}

/**
 * An environment variable the config relies on is not set, or holds nothing usable (the
 * PostgreSQL URL that `[storage] url_env` names). A configuration problem like an invalid file, so the CLI exits 3
 * (`EXIT.config`), as for a missing Discord token; shown as its message and what to set.
 */
export class UnsetVariableError extends InputError {
  override name = 'UnsetVariableError';
  /** The variable's name. */
  readonly variable: string;

  constructor(variable: string, message: string, options: { hint: string; context?: Record<string, unknown> }) {
    super(message, { hint: options.hint, context: { variable, ...options.context } });
    this.variable = variable;
  }
}
