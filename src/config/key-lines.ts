/**
 * Where each key sits in a TOML text. smol-toml returns plain values without positions, so this
 * light scanner finds the line of every table header and `key = value` line, so that problems
 * can say "(line N)". It is best effort: a key it cannot place simply gets no line number.
 */
export class KeyLines {
  private readonly lines = new Map<string, number>();

  constructor(text: string) {
    let table: string[] = [];
    let openTripleQuote: string | undefined;
    const rows = text.split(/\r?\n/);
    for (let index = 0; index < rows.length; index++) {
      const row = rows[index] ?? '';
      if (openTripleQuote !== undefined) {
        if (countOccurrences(row, openTripleQuote) % 2 === 1) openTripleQuote = undefined;
        continue;
      }
      const trimmed = row.trim();
      if (trimmed === '' || trimmed.startsWith('#')) continue;
      const lineNumber = index + 1;
      if (trimmed.startsWith('[')) {
        const inner = trimmed.startsWith('[[') ? trimmed.slice(2) : trimmed.slice(1);
        const parsed = parseKey(inner);
        if (parsed) {
          table = parsed.segments;
          this.remember(table, lineNumber);
        }
        continue;
      }
      const parsed = parseKey(trimmed);
      if (!parsed || !parsed.rest.trimStart().startsWith('=')) continue;
      const path = [...table, ...parsed.segments];
      this.remember(path, lineNumber);
      const value = parsed.rest.trimStart().slice(1);
      for (const quote of ['"""', "'''"]) {
        if (countOccurrences(value, quote) % 2 === 1) openTripleQuote = quote;
      }
    }
  }

  /** Line of the key (or table) at this path, or of its closest located ancestor. */
  lineOf(path: readonly string[]): number | undefined {
    for (let length = path.length; length > 0; length--) {
      const line = this.lines.get(JSON.stringify(path.slice(0, length)));
      if (line !== undefined) return line;
    }
    return undefined;
  }

  /** Line of exactly this key path, without falling back to a parent. */
  exactLineOf(path: readonly string[]): number | undefined {
    return this.lines.get(JSON.stringify(path));
  }

  /** Records the path and, implicitly defined by it, each of its parents (first mention wins). */
  private remember(path: readonly string[], line: number): void {
    for (let length = 1; length <= path.length; length++) {
      const key = JSON.stringify(path.slice(0, length));
      if (!this.lines.has(key)) this.lines.set(key, line);
    }
  }
}

function countOccurrences(text: string, needle: string): number {
  let count = 0;
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++;
  return count;
}

/** Parses a dotted key (`a.b."c d"`) from the start of `text`; returns it and what follows. */
function parseKey(text: string): { segments: string[]; rest: string } | undefined {
  const segments: string[] = [];
  let at = 0;
  for (;;) {
    while (text[at] === ' ' || text[at] === '\t') at++;
    const first = text[at];
    if (first === '"' || first === "'") {
      let end = at + 1;
      let value = '';
      while (end < text.length && text[end] !== first) {
        if (first === '"' && text[end] === '\\' && end + 1 < text.length) {
          value += text[end + 1];
          end += 2;
          continue;
        }
        value += text[end];
        end++;
      }
      if (end >= text.length) return undefined;
      segments.push(value);
      at = end + 1;
    } else {
      const match = /^[A-Za-z0-9_-]+/.exec(text.slice(at));
      if (!match) return undefined;
      segments.push(match[0]);
      at += match[0].length;
    }
    while (text[at] === ' ' || text[at] === '\t') at++;
    if (text[at] !== '.') break;
    at++;
  }
  return { segments, rest: text.slice(at) };
}
