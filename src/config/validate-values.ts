import { schemaNameProblem } from '../common/schema-name.js';
import { snowflakeProblem, SNOWFLAKE_RULE } from '../common/snowflake.js';
import type { FieldSpec } from './schema.js';

/** The outcome of checking one value against its spec: the value to keep, or why not. */
export type ValueCheck = { ok: true; value: unknown } | { ok: false; message: string };

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** "a string", "a table"...: used in "must be X, got Y"; never echoes a string's content. */
export function describeType(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'number') return Number.isInteger(value) ? 'an integer' : 'a decimal number';
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'boolean') return 'a boolean';
  if (typeof value === 'bigint') return 'an integer';
  if (value instanceof Date || (typeof value === 'object' && 'toISOString' in value)) return 'a date';
  return 'a table';
}

/**
 * Checks one leaf value (anything but a table). Messages never quote a string value in full,
 * since a misplaced secret may sit in any string.
 */
export function checkValue(value: unknown, spec: Exclude<FieldSpec, { kind: 'table' }>): ValueCheck {
  switch (spec.kind) {
    case 'integer': {
      // Past 2^53 a number no longer holds every whole value (the parser hands those over as
      // BigInt, and 1e300 is a float that merely looks whole): too large for any setting.
      const bounds = integerBounds(spec);
      if (typeof value === 'bigint' || (typeof value === 'number' && Number.isFinite(value) && Number.isInteger(value) && !Number.isSafeInteger(value))) {
        if (value < 0) return fail(`must be ${bounds}, got ${value}`);
        return fail(`must be at most ${spec.max ?? Number.MAX_SAFE_INTEGER}, got ${value}`);
      }
      if (typeof value !== 'number') return fail(`must be a whole number, got ${describeType(value)}`);
      if (!Number.isInteger(value)) return fail(`must be a whole number ${bounds}, got ${tomlNumber(value)}`);
      if (value < spec.min || (spec.max !== undefined && value > spec.max)) {
        return fail(`must be ${bounds}, got ${value}`);
      }
      return pass(value);
    }
    case 'decimal': {
      const unit = spec.meaning === undefined ? '' : ` (${spec.meaning})`;
      if (typeof value === 'bigint') return value < BigInt(spec.min) ? fail(`must be a number at least ${spec.min}${unit}, got ${value}`) : pass(Number(value));
      if (typeof value !== 'number' || !Number.isFinite(value)) {
        return fail(`must be a number at least ${spec.min}${unit}, got ${typeof value === 'number' ? tomlNumber(value) : describeType(value)}`);
      }
      if (value < spec.min) return fail(`must be a number at least ${spec.min}${unit}, got ${value}`);
      return pass(value);
    }
    case 'fraction':
    case 'unit': {
      const range = spec.kind === 'fraction' ? 'in (0, 1] (above 0, at most 1)' : 'in [0, 1]';
      if (typeof value !== 'number' || Number.isNaN(value)) {
        return fail(`must be a number ${range}, got ${typeof value === 'number' ? tomlNumber(value) : describeType(value)}`);
      }
      const low = spec.kind === 'fraction' ? value <= 0 : value < 0;
      if (low || value > 1) return fail(`must be a number ${range}, got ${tomlNumber(value)}`);
      return pass(value);
    }
    case 'string': {
      if (typeof value !== 'string') return fail(`must be a string, got ${describeType(value)}`);
      if (spec.nonEmpty && value.trim() === '') return fail('must not be empty');
      return pass(value);
    }
    case 'url': {
      if (typeof value !== 'string') return fail(`must be a URL string, got ${describeType(value)}`);
      if (value === '') return spec.allowEmpty ? pass(value) : fail('must not be empty');
      let url: URL;
      try {
        url = new URL(value);
      } catch {
        return fail('must be an absolute URL such as http://127.0.0.1:8080');
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return fail('must be an http:// or https:// URL');
      if (url.username !== '' || url.password !== '') {
        return fail('must not carry credentials; put the key in an environment variable and name it with api_key_env');
      }
      return pass(value);
    }
    case 'envName': {
      if (typeof value !== 'string') {
        return fail(`must be the name of an environment variable, got ${describeType(value)}`);
      }
      if (value === '') return spec.allowEmpty ? pass(value) : fail('must name an environment variable');
      if (!ENV_NAME.test(value)) {
        return fail(
          'must be the NAME of an environment variable (letters, digits, _), not the secret itself; ' +
            'set the secret in the environment and write its name here',
        );
      }
      return pass(value);
    }
    case 'boolean':
      return typeof value === 'boolean' ? pass(value) : fail(`must be true or false, got ${describeType(value)}`);
    case 'enum': {
      if (typeof value !== 'string') {
        return fail(`must be one of ${spec.values.join(', ')}; got ${describeType(value)}`);
      }
      if (!spec.values.includes(value)) {
        const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
        return fail(`must be one of ${spec.values.join(', ')}; got "${shown}"`);
      }
      return pass(value);
    }
    case 'idList': {
      if (!Array.isArray(value)) return fail(`must be a list of quoted ids, got ${describeType(value)}`);
      const problem = idListProblem(value);
      if (problem !== undefined) return fail(problem);
      // Stray spaces would make an id that never matches what Discord sends.
      return pass(Object.freeze(value.map((item: string) => item.trim())));
    }
    case 'listen': {
      if (typeof value !== 'string') return fail(`must be "host:port" (or "" for off), got ${describeType(value)}`);
      if (value.trim() === '') return pass('');
      const problem = listenProblem(value.trim());
      return problem === undefined ? pass(value.trim()) : fail(problem);
    }
    case 'schemaName': {
      if (typeof value !== 'string') return fail(`must be a PostgreSQL schema name, got ${describeType(value)}`);
      // Not trimmed: the connection takes the name as written, so a stray space is refused here.
      const problem = schemaNameProblem(value);
      return problem === undefined ? pass(value) : fail(problem);
    }
  }
}

/**
 * Why a `host:port` listen address is unusable, or undefined when it is fine. IPv6 hosts go in
 * brackets (`[::1]:9464`); port 0 asks the system for a free port (the log names it).
 */
export function listenProblem(text: string): string | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(text);
  const shown = text.length > 60 ? `${text.slice(0, 60)}…` : text;
  if (!match) return `must be "host:port" such as "127.0.0.1:9464" (or "" for off), got "${shown}"`;
  const port = Number(match[2]);
  if (port > 65_535) return `port must be between 0 and 65535, got ${port}`;
  return undefined;
}

/** Splits a valid listen address into the host and port `net.Server.listen` takes. */
export function splitListen(text: string): { host: string; port: number } {
  const at = text.lastIndexOf(':');
  const host = text.slice(0, at).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(text.slice(at + 1)) };
}

/**
 * Every bad item of an id list in one message, not only the first: the operator fixes the list
 * in one pass. Items with the same fault are named together ("items 2 and 4 are not Discord
 * ids: ..."), so the explanation is not repeated per item.
 */
function idListProblem(items: readonly unknown[]): string | undefined {
  const faults = new Map<string, number[]>();
  const note = (fault: string, index: number) => faults.set(fault, [...(faults.get(fault) ?? []), index + 1]);
  for (const [index, item] of items.entries()) {
    if (typeof item === 'number' || typeof item === 'bigint') note('bare', index);
    else if (typeof item !== 'string') note(`type:${describeType(item)}`, index);
    else if (item.trim() === '') note('empty', index);
    // A name ("general", "@alice") never matches anything, so the bot would silently ignore everyone.
    else if (!/^\d+$/.test(item.trim())) note('name', index);
    else if (snowflakeProblem(item.trim()) !== undefined) note('range', index);
  }
  if (faults.size === 0) return undefined;
  const parts = [...faults].map(([fault, numbers]) => {
    const which = itemNumbers(numbers);
    const plural = numbers.length > 1;
    if (fault === 'bare') {
      return `${which} ${plural ? 'are bare numbers' : 'is a bare number'}; write Discord ids as quoted strings ("123…"), since ids this long lose digits as numbers`;
    }
    if (fault === 'empty') return `${which} ${plural ? 'are' : 'is'} empty; write a Discord id such as "123456789012345678"`;
    if (fault === 'name') {
      return (
        `${which} ${plural ? 'are not Discord ids' : 'is not a Discord id'}: ids are all digits (in Discord, turn on Developer Mode, ` +
        'then right-click a server, channel, role or user and choose Copy ID); names do not work here'
      );
    }
    if (fault === 'range') return `${which} ${plural ? 'are not Discord ids' : 'is not a Discord id'}: an id is ${SNOWFLAKE_RULE}`;
    return `${which} must be ${plural ? 'quoted Discord ids' : 'a quoted Discord id'}, got ${fault.slice('type:'.length)}`;
  });
  // One fault a line: formatProblem puts the key and line on the first, the others under it.
  return parts.join('\n');
}

/** "item 2", "items 2 and 3", "items 2, 3 and 5"; a long run is cut ("items 1, 2, ... 10 and 40 more"). */
function itemNumbers(numbers: readonly number[]): string {
  if (numbers.length === 1) return `item ${numbers[0]}`;
  if (numbers.length > 10) return `items ${numbers.slice(0, 10).join(', ')} and ${numbers.length - 10} more`;
  return `items ${numbers.slice(0, -1).join(', ')} and ${numbers.at(-1)}`;
}

/** A number as TOML spells it: `nan` and `inf`, not JavaScript's NaN and Infinity. */
function tomlNumber(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (value === Number.POSITIVE_INFINITY) return 'inf';
  if (value === Number.NEGATIVE_INFINITY) return '-inf';
  return String(value);
}

function integerBounds(spec: { min: number; max?: number; meaning?: string }): string {
  const unit = spec.meaning === undefined ? '' : ` (${spec.meaning})`;
  return spec.max === undefined ? `at least ${spec.min}${unit}` : `between ${spec.min} and ${spec.max}${unit}`;
}

function pass(value: unknown): ValueCheck {
  return { ok: true, value };
}

function fail(message: string): ValueCheck {
  return { ok: false, message };
}
