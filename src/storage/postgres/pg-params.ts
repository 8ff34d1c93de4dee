import type { TranslatedStatement } from './translate-sql.js';

/** Orders the caller's arguments as `$1..$n`, the way better-sqlite3 accepts them. */
export function bind(statement: TranslatedStatement, args: unknown[]): unknown[] {
  const spec = statement.params;
  if (spec.kind === 'none') return [];
  if (spec.kind === 'named') {
    const values = args[0];
    if (values === null || typeof values !== 'object') throw new TypeError('named parameters need an object');
    return spec.names.map((name) => {
      if (!(name in values)) throw new RangeError(`Missing named parameter "${name}"`);
      return value((values as Record<string, unknown>)[name]);
    });
  }
  const flat = args.flat();
  if (flat.length !== spec.count) throw new RangeError(`Too ${flat.length < spec.count ? 'few' : 'many'} parameter values were provided`);
  return flat.map(value);
}

/** A bigint travels as its decimal text (the server casts it); undefined is NULL, as in better-sqlite3. */
function value(input: unknown): unknown {
  if (typeof input === 'bigint') return input.toString();
  if (input === undefined) return null;
  return input;
}
