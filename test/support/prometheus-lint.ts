/**
 * The rules `promtool check metrics` applies (Prometheus' promlint), written out so the tests
 * hold them whether or not promtool is installed: help text, counters end in `_total` and
 * nothing else does, base units, no abbreviated units, no type in the name, snake_case names
 * and labels, no colons, histogram and summary suffixes and labels kept for them.
 */

export interface LintProblem {
  metric: string;
  text: string;
}

interface Family {
  name: string;
  type: string | undefined;
  help: string | undefined;
  labels: Set<string>;
  sampleNames: Set<string>;
}

/** Base units, and units Prometheus wants as a base unit instead (promlint's table). */
const BASE_UNITS = ['amperes', 'bytes', 'celsius', 'grams', 'joules', 'kelvin', 'meters', 'metres', 'seconds', 'volts'];
const NON_BASE_UNITS: ReadonlyMap<string, string> = new Map([
  ['minutes', 'seconds'],
  ['hours', 'seconds'],
  ['days', 'seconds'],
  ['weeks', 'seconds'],
  ['kelvins', 'kelvin'],
  ['fahrenheit', 'celsius'],
  ['rankine', 'celsius'],
  ['inches', 'meters'],
  ['yards', 'meters'],
  ['miles', 'meters'],
  ['bits', 'bytes'],
  ['calories', 'joules'],
  ['pounds', 'grams'],
  ['ounces', 'grams'],
]);
const UNIT_PREFIXES = ['pico', 'nano', 'micro', 'milli', 'centi', 'deci', 'deca', 'hecto', 'kilo', 'kibi', 'mega', 'mibi', 'giga', 'gibi', 'tera', 'tebi', 'peta', 'pebi'];
const ABBREVIATED_UNITS = ['s', 'ms', 'us', 'ns', 'sec', 'b', 'kb', 'mb', 'gb', 'tb', 'pb', 'm', 'h', 'd'];

/** The base unit a name word should be written in instead, if it is a prefixed or non-base unit. */
function preferredUnit(word: string): string | undefined {
  const direct = NON_BASE_UNITS.get(word);
  if (direct) return direct;
  for (const prefix of UNIT_PREFIXES) {
    if (!word.startsWith(prefix)) continue;
    const rest = word.slice(prefix.length);
    if (BASE_UNITS.includes(rest)) return rest;
    if (NON_BASE_UNITS.has(rest)) return NON_BASE_UNITS.get(rest);
  }
  return undefined;
}
const TYPES_IN_NAME = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

function families(text: string): Map<string, Family> {
  const byName = new Map<string, Family>();
  const family = (name: string): Family => {
    let found = byName.get(name);
    if (!found) {
      found = { name, type: undefined, help: undefined, labels: new Set(), sampleNames: new Set() };
      byName.set(name, found);
    }
    return found;
  };
  for (const line of text.split('\n')) {
    const help = /^# HELP (\S+) ?(.*)$/.exec(line);
    if (help) {
      family(help[1]!).help = help[2]!;
      continue;
    }
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) {
      family(type[1]!).type = type[2]!;
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!sample) continue;
    const sampleName = sample[1]!;
    const owner = [...byName.values()].find(
      (candidate) => sampleName === candidate.name || (/(_bucket|_sum|_count)$/.test(sampleName) && sampleName.replace(/(_bucket|_sum|_count)$/, '') === candidate.name),
    );
    const target = owner ?? family(sampleName);
    target.sampleNames.add(sampleName);
    for (const pair of (sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="/g)) target.labels.add(pair[1]!);
  }
  return byName;
}

/** Every problem promtool would report for this exposition text. */
export function lintMetrics(text: string): LintProblem[] {
  const problems: LintProblem[] = [];
  for (const family of families(text).values()) {
    const say = (problem: string): void => {
      problems.push({ metric: family.name, text: problem });
    };
    const name = family.name;
    if (!family.help) say('no help text');
    if (family.type === 'counter' && !name.endsWith('_total')) say('counter metrics should have "_total" suffix');
    if (family.type !== 'counter' && name.endsWith('_total')) say('non-counter metrics should not have "_total" suffix');
    if (family.type !== 'histogram' && family.type !== 'summary') {
      if (/(_bucket|_sum|_count)$/.test(name)) say(`non-histogram and non-summary metrics should not have "${/_(bucket|sum|count)$/.exec(name)![0]}" suffix`);
      if (family.labels.has('le')) say('non-histogram metrics should not have "le" label');
      if (family.labels.has('quantile')) say('non-summary metrics should not have "quantile" label');
    }
    const words = name.split('_');
    for (const word of words) {
      const base = preferredUnit(word);
      if (base) say(`use base unit "${base}" instead of "${word}"`);
      if (ABBREVIATED_UNITS.includes(word)) say('metric names should not contain abbreviated units');
    }
    for (const type of TYPES_IN_NAME) {
      if (words.includes(type)) say(`metric name should not include type '${type}'`);
    }
    if (name.includes(':')) say("metric names should not contain ':'");
    if (/[A-Z]/.test(name)) say("metric names should be written in 'snake_case' not 'camelCase'");
    for (const label of family.labels) {
      if (/[A-Z]/.test(label)) say("label names should be written in 'snake_case' not 'camelCase'");
    }
  }
  return problems;
}
