import { closestMatch } from './edit-distance.js';
import type { KeyLines } from './key-lines.js';
import type { ConfigProblem } from './problems.js';
import {
  CONFIG_SPEC,
  SECRET_KEY_PATTERN,
  SECRET_REPLACEMENTS,
  allTablePaths,
  snakeToCamel,
  type TableSpec,
} from './schema.js';
import { checkValue, describeType } from './validate-values.js';

/** A plain object of camelCase keys holding only the values that passed their checks. */
export type PartialSettings = { [key: string]: unknown };

/** Where problems go while a file is checked. */
export interface ValidationSink {
  lines: KeyLines;
  problems: ConfigProblem[];
}

export function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !('toISOString' in value);
}

/** `channels."12 34".compaction` from segments; bare keys stay unquoted as TOML allows. */
export function formatPath(segments: readonly string[]): string {
  return segments.map((segment) => (/^[A-Za-z0-9_-]+$/.test(segment) ? segment : JSON.stringify(segment))).join('.');
}

export function report(sink: ValidationSink, segments: readonly string[], message: string): void {
  const line = sink.lines.lineOf(segments);
  sink.problems.push({ path: formatPath(segments), message, ...(line === undefined ? {} : { line }) });
}

/**
 * Checks a raw TOML table against its spec. Every problem is collected (never only the first);
 * the result holds only keys whose value passed, ready to be merged over defaults.
 * `specPath` is the path in the schema (`defaults.compaction`), which differs from the file
 * path for channel overrides (`channels.123.compaction`).
 */
export function validateTable(
  raw: Record<string, unknown>,
  spec: TableSpec,
  filePath: readonly string[],
  specPath: string,
  sink: ValidationSink,
): PartialSettings {
  const result: PartialSettings = {};
  for (const [key, value] of Object.entries(raw)) {
    const segments = [...filePath, key];
    // Own keys only: `constructor` or `toString` in the file must not find Object.prototype's.
    const field = Object.hasOwn(spec, key) ? spec[key] : undefined;
    if (field === undefined) {
      report(sink, segments, unknownKeyMessage(key, spec, specPath, filePath));
      continue;
    }
    if (field.kind === 'table') {
      if (!isTable(value)) {
        report(sink, segments, `must be a table ([${formatPath(segments)}]), got ${describeType(value)}`);
        continue;
      }
      const childSpecPath = specPath === '' ? key : `${specPath}.${key}`;
      result[snakeToCamel(key)] = validateTable(value, field.fields, segments, childSpecPath, sink);
      continue;
    }
    const checked = checkValue(value, field);
    if (checked.ok) result[snakeToCamel(key)] = checked.value;
    else report(sink, segments, checked.message);
  }
  return result;
}

function unknownKeyMessage(key: string, spec: TableSpec, specPath: string, filePath: readonly string[]): string {
  // Inside [channels."<id>"] the [defaults] tables are spelled with the channel's own path.
  const channel = filePath[0] === 'channels' && filePath.length >= 2 ? filePath.slice(0, 2) : undefined;
  const tableName = (tablePath: string): string => {
    if (tablePath === '') return 'the top level';
    const [head, ...tail] = tablePath.split('.');
    if (channel !== undefined && head === 'defaults') return `[${formatPath([...channel, ...tail])}]`;
    return `[${tablePath}]`;
  };
  if (SECRET_KEY_PATTERN.test(key)) {
    const replacement = SECRET_REPLACEMENTS[specPath];
    const advice = replacement
      ? `put it in the environment variable ${replacement.variable} (or another, named by \`${replacement.key}\`)`
      : 'put it in an environment variable; [llm] api_key_env and [discord] token_env name the variables Magpie reads';
    return `secrets must not be written in the config file; remove this key and ${advice}`;
  }
  const here = Object.keys(spec);
  const typo = closestMatch(key, here);
  if (typo !== undefined) return `unknown key; did you mean \`${typo}\`?`;
  // A right key in the wrong table is a common slip: say where it belongs.
  const elsewhere = allTablePaths(CONFIG_SPEC)
    .filter((table) => table.path !== specPath && table.keys.includes(key))
    .map((table) => tableName(table.path));
  if (elsewhere.length > 0) return `unknown key here; \`${key}\` belongs in ${elsewhere.join(' or ')}`;
  const fuzzy = allTablePaths(CONFIG_SPEC)
    .filter((table) => table.path !== specPath)
    .map((table) => ({ table, match: closestMatch(key, table.keys) }))
    .find((candidate) => candidate.match !== undefined);
  if (fuzzy?.match !== undefined) {
    return `unknown key; did you mean \`${fuzzy.match}\` in ${tableName(fuzzy.table.path)}?`;
  }
  return `unknown key (known keys here: ${here.join(', ')})`;
}
