/**
 * Where each key sits in a TOML text. smol-toml returns plain values without positions, so this
 * scanner finds the line of every table header and `key = value`, so that problems can say
 * "(line N)". It reads strings (basic, literal and their multi-line forms, with escapes) and
 * comments as TOML does: a `'''` inside a basic string or a `"""` in a comment does not open
 * anything, and keys after it keep their lines. The text has already been parsed, so it is
 * valid TOML; still, the scanner never throws, and a key it cannot place gets no line number.
 */
export class KeyLines {
  private readonly lines = new Map<string, number>();

  constructor(text: string) {
    const scanner = new Scanner(text);
    let table: string[] = [];
    while (!scanner.done()) {
      scanner.skipBlank();
      if (scanner.done()) break;
      const line = scanner.line();
      if (scanner.peek() === '[') {
        const header = scanner.tableHeader();
        if (header !== undefined) {
          table = header;
          this.remember(table, line);
        }
        scanner.skipLine();
        continue;
      }
      const key = scanner.key();
      scanner.skipSpaces();
      if (key === undefined || scanner.peek() !== '=') {
        scanner.skipLine();
        continue;
      }
      scanner.advance();
      const path = [...table, ...key];
      this.remember(path, line);
      scanner.skipValue((inner, innerLine) => this.remember([...path, ...inner], innerLine));
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

/** Called for each key of an inline table (`{ a = 1 }`), with its path below the value's key. */
type InlineKeyVisitor = (path: readonly string[], line: number) => void;

/** Sticky: matches only at `lastIndex`, without copying the rest of the text. */
const BARE_KEY = /[A-Za-z0-9_-]+/y;

const BASIC_ESCAPES: Readonly<Record<string, string>> = { b: '\b', t: '\t', n: '\n', f: '\f', r: '\r', e: '\x1b', '"': '"', '\\': '\\' };

/** A cursor over the text that knows TOML's strings, comments and values well enough to skip them. */
class Scanner {
  private at = 0;
  /** Offsets at which each line starts; a line ends at "\n" (a lone "\r" is no line break in TOML). */
  private readonly lineStarts: number[] = [0];

  constructor(private readonly text: string) {
    for (let index = text.indexOf('\n'); index !== -1; index = text.indexOf('\n', index + 1)) this.lineStarts.push(index + 1);
  }

  done(): boolean {
    return this.at >= this.text.length;
  }

  peek(offset = 0): string | undefined {
    return this.text[this.at + offset];
  }

  advance(count = 1): void {
    this.at = Math.min(this.text.length, this.at + count);
  }

  /** 1-based line of the cursor. */
  line(): number {
    let low = 0;
    let high = this.lineStarts.length - 1;
    while (low < high) {
      const middle = Math.ceil((low + high) / 2);
      if (this.lineStarts[middle]! <= this.at) low = middle;
      else high = middle - 1;
    }
    return low + 1;
  }

  skipSpaces(): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.advance();
  }

  /** Spaces, line breaks and comments. */
  skipBlank(): void {
    for (;;) {
      const char = this.peek();
      if (char === ' ' || char === '\t' || char === '\r' || char === '\n') this.advance();
      else if (char === '#') this.skipLine();
      else return;
    }
  }

  /** To the start of the next line (a comment ends there too). */
  skipLine(): void {
    const end = this.text.indexOf('\n', this.at);
    this.at = end === -1 ? this.text.length : end + 1;
  }

  /** `[a.b]` or `[[a.b]]`: the key's segments, or undefined when it cannot be read. */
  tableHeader(): string[] | undefined {
    const isArray = this.peek(1) === '[';
    this.advance(isArray ? 2 : 1);
    const key = this.key();
    this.skipSpaces();
    if (key === undefined || this.peek() !== ']') return undefined;
    return key;
  }

  /** A dotted key (`a."b c".'d'`), or undefined when none starts here. */
  key(): string[] | undefined {
    const segments: string[] = [];
    for (;;) {
      this.skipSpaces();
      const char = this.peek();
      let segment: string | undefined;
      if (char === '"' || char === "'") {
        // A key is never a multi-line string; `"""` here is not TOML.
        if (this.peek(1) === char && this.peek(2) === char) return undefined;
        segment = this.singleLineString();
      } else {
        BARE_KEY.lastIndex = this.at;
        const match = BARE_KEY.exec(this.text);
        if (match) {
          segment = match[0];
          this.advance(segment.length);
        }
      }
      if (segment === undefined) return undefined;
      segments.push(segment);
      this.skipSpaces();
      if (this.peek() !== '.') return segments;
      this.advance();
    }
  }

  /**
   * Skips one value, however many lines it spans. An inline table's keys are handed to `visit`
   * (they are keys of the file too); those of tables inside arrays are not, having no path.
   */
  skipValue(visit: InlineKeyVisitor | undefined): void {
    this.skipSpaces();
    const char = this.peek();
    if (char === '"' || char === "'") {
      if (this.peek(1) === char && this.peek(2) === char) this.multiLineString(char);
      else this.singleLineString();
    } else if (char === '[') {
      this.advance();
      for (;;) {
        this.skipBlank();
        if (this.done() || this.peek() === ']') break;
        const before = this.at;
        this.skipValue(undefined);
        this.skipBlank();
        if (this.peek() === ',') this.advance();
        else if (this.at === before) this.advance();
      }
      this.advance();
    } else if (char === '{') {
      this.advance();
      for (;;) {
        this.skipBlank();
        if (this.done() || this.peek() === '}') break;
        const line = this.line();
        const before = this.at;
        const key = this.key();
        this.skipSpaces();
        if (key !== undefined && this.peek() === '=') {
          this.advance();
          visit?.(key, line);
          this.skipValue(visit === undefined ? undefined : (inner, innerLine) => visit([...key, ...inner], innerLine));
        }
        this.skipBlank();
        if (this.peek() === ',') this.advance();
        else if (this.at === before) this.advance();
      }
      this.advance();
    } else {
      // A number, boolean or date: it ends where a separator, a comment or the line does.
      while (!this.done() && !'\n#,]}'.includes(this.peek()!)) this.advance();
    }
  }

  /** `"..."` with its escapes or `'...'` as written; the cursor is on the opening quote. */
  private singleLineString(): string | undefined {
    const quote = this.peek();
    this.advance();
    let value = '';
    while (!this.done()) {
      const char = this.peek()!;
      if (char === quote) {
        this.advance();
        return value;
      }
      if (char === '\n') return undefined;
      if (quote === '"' && char === '\\') {
        value += this.escape();
        continue;
      }
      value += char;
      this.advance();
    }
    return undefined;
  }

  /** One escape of a basic string; the cursor is on the backslash. */
  private escape(): string {
    const letter = this.peek(1) ?? '';
    const digits = letter === 'u' ? 4 : letter === 'U' ? 8 : letter === 'x' ? 2 : 0;
    if (digits > 0) {
      const hex = this.text.slice(this.at + 2, this.at + 2 + digits);
      this.advance(2 + digits);
      const code = /^[0-9A-Fa-f]+$/.test(hex) ? Number.parseInt(hex, 16) : Number.NaN;
      return Number.isInteger(code) && code <= 0x10ffff ? String.fromCodePoint(code) : '';
    }
    this.advance(2);
    return BASIC_ESCAPES[letter] ?? letter;
  }

  /**
   * `"""..."""` or `'''...'''`; the cursor is on the first quote. Up to two quotes may stand
   * right before the closing three (`"""a""""` holds `a"`), so a run of quotes closes at its end.
   */
  private multiLineString(quote: string): void {
    this.advance(3);
    while (!this.done()) {
      const char = this.peek();
      if (quote === '"' && char === '\\') {
        // Whatever follows a backslash is escaped, a quote included; a line-ending backslash
        // only swallows blanks, which the loop passes over anyway.
        this.advance(2);
        continue;
      }
      if (char === quote && this.peek(1) === quote && this.peek(2) === quote) {
        let run = 3;
        while (run < 5 && this.peek(run) === quote) run++;
        this.advance(run);
        return;
      }
      this.advance();
    }
  }
}
