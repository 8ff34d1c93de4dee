/**
 * Turns a statement written for SQLite into one PostgreSQL runs, for the small dialect the stores
 * use: `?`, `@name`, `:name` and `$name` parameters become `$n`; `INSERT OR IGNORE` and
 * `INSERT OR REPLACE` become `ON CONFLICT` clauses; `instr` becomes `strpos`; camel-case aliases
 * keep their case. SQL that needs more (full-text search, JSON) is written per dialect by its
 * store, and arrives here already in PostgreSQL's form (`$1` parameters pass through).
 */

export interface TranslatedStatement {
  text: string;
  /** Positional parameters, in order (`?`), or the names of named ones, by `$n` position. */
  params: { kind: 'positional'; count: number } | { kind: 'named'; names: string[] } | { kind: 'none' };
  /** The table of an INSERT, when the statement is one. */
  insertInto?: string;
  /** An `INSERT OR REPLACE`: the caller adds the conflict clause once it knows the table's key. */
  replace?: { table: string; columns: string[] };
  hasReturning: boolean;
}

/** Rewrites parameters outside string literals, quoted identifiers and comments. */
function rewriteParameters(sql: string): { text: string; params: TranslatedStatement['params'] } {
  let out = '';
  let positional = 0;
  const names: string[] = [];
  let index = 0;
  while (index < sql.length) {
    const char = sql[index]!;
    const next = sql[index + 1];
    if (char === "'" || char === '"') {
      const end = closingQuote(sql, index, char);
      out += sql.slice(index, end);
      index = end;
      continue;
    }
    if (char === '-' && next === '-') {
      const end = sql.indexOf('\n', index);
      const stop = end < 0 ? sql.length : end;
      out += sql.slice(index, stop);
      index = stop;
      continue;
    }
    if (char === '/' && next === '*') {
      const end = sql.indexOf('*/', index + 2);
      const stop = end < 0 ? sql.length : end + 2;
      out += sql.slice(index, stop);
      index = stop;
      continue;
    }
    if (char === ':' && next === ':') {
      out += '::';
      index += 2;
      continue;
    }
    if (char === '?') {
      positional += 1;
      out += `$${positional}`;
      index += 1;
      continue;
    }
    if ((char === '@' || char === ':' || char === '$') && next !== undefined && /[A-Za-z_]/.test(next)) {
      let end = index + 1;
      while (end < sql.length && /[A-Za-z0-9_]/.test(sql[end]!)) end += 1;
      const name = sql.slice(index + 1, end);
      let position = names.indexOf(name);
      if (position < 0) {
        names.push(name);
        position = names.length - 1;
      }
      out += `$${position + 1}`;
      index = end;
      continue;
    }
    out += char;
    index += 1;
  }
  if (positional > 0 && names.length > 0) throw new Error('a statement mixes positional (?) and named parameters');
  const params: TranslatedStatement['params'] =
    positional > 0 ? { kind: 'positional', count: positional } : names.length > 0 ? { kind: 'named', names } : { kind: 'none' };
  return { text: out, params };
}

function closingQuote(sql: string, start: number, quote: string): number {
  let index = start + 1;
  while (index < sql.length) {
    if (sql[index] === quote) {
      if (sql[index + 1] === quote) {
        index += 2;
        continue;
      }
      return index + 1;
    }
    index += 1;
  }
  return sql.length;
}

const INSERT_OR = /^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+/i;
const INSERT_INTO = /^\s*INSERT\s+INTO\s+([A-Za-z_][A-Za-z0-9_]*)/i;

export function translateStatement(sql: string): TranslatedStatement {
  let text = sql.trim().replace(/;\s*$/, '');
  let conflict: 'ignore' | 'replace' | undefined;
  const or = INSERT_OR.exec(text);
  if (or) {
    conflict = or[1]!.toUpperCase() === 'IGNORE' ? 'ignore' : 'replace';
    text = text.replace(INSERT_OR, 'INSERT INTO ');
  }
  text = text.replace(/\binstr\s*\(/gi, 'strpos(');
  // PostgreSQL folds unquoted names to lower case; SQLite keeps an alias as written.
  // Only mixed-case names are aliases to keep: `AS MATERIALIZED` is a keyword.
  text = text.replace(/\bAS\s+([A-Za-z_][A-Za-z0-9_]*)\b/g, (whole, name: string) => (/[a-z]/.test(name) && /[A-Z]/.test(name) ? `AS "${name}"` : whole));
  const rewritten = rewriteParameters(text);
  text = rewritten.text;
  const insert = INSERT_INTO.exec(text);
  const hasReturning = /\bRETURNING\b/i.test(text);
  const result: TranslatedStatement = { text, params: rewritten.params, hasReturning };
  if (insert) result.insertInto = insert[1]!.toLowerCase();
  if (conflict === 'ignore') result.text = withClause(text, 'ON CONFLICT DO NOTHING');
  if (conflict === 'replace' && insert) {
    const columns = /^\s*INSERT\s+INTO\s+[A-Za-z_][A-Za-z0-9_]*\s*\(([^)]*)\)/i.exec(text);
    if (!columns) throw new Error('INSERT OR REPLACE needs an explicit column list');
    result.replace = { table: insert[1]!.toLowerCase(), columns: columns[1]!.split(',').map((column) => column.trim().toLowerCase()) };
  }
  return result;
}

/** Completes an `INSERT OR REPLACE` once the table's primary key is known. */
export function replaceClause(statement: TranslatedStatement, primaryKey: string[]): string {
  const replace = statement.replace!;
  const updates = replace.columns.filter((column) => !primaryKey.includes(column));
  const action = updates.length === 0 ? 'DO NOTHING' : `DO UPDATE SET ${updates.map((column) => `${column} = EXCLUDED.${column}`).join(', ')}`;
  return withClause(statement.text, `ON CONFLICT (${primaryKey.join(', ')}) ${action}`);
}

/** Adds a clause at the end of an INSERT, before its RETURNING if it has one. */
export function withClause(text: string, clause: string): string {
  const returning = /\sRETURNING\s/i.exec(text);
  if (!returning) return `${text} ${clause}`;
  return `${text.slice(0, returning.index)} ${clause}${text.slice(returning.index)}`;
}
