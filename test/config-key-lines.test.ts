/**
 * `config check` puts each problem on the line of its key. Quotes and comments are read as TOML
 * reads them: a `'''` inside a basic string, a `"""` in a comment or a literal string, a key-like
 * line inside a multi-line string, none of them moves the lines of the keys after it. Checked on
 * the cases that went wrong, then on generated files whose every key's line is known.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse } from 'smol-toml';
import { checkConfigText, type ConfigProblem } from '../src/config/index.js';
import { KeyLines } from '../src/config/key-lines.js';

function problemsOf(text: string): ConfigProblem[] {
  const result = checkConfigText(text);
  assert.equal(result.ok, false, `expected the config to be refused: ${text}`);
  return result.problems;
}

describe('config check lines after quotes and comments', () => {
  const cases: Array<{ name: string; text: string }> = [
    { name: "''' in a basic string", text: `[defaults]\nsystem_prompt = "don't use ''' here"\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: '""" in a comment', text: `[defaults]\n# a """ here\nsystem_prompt = "x"\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: '""" in a comment after a value', text: `[defaults]\nsystem_prompt = "x" # """\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: '""" in a literal string', text: `[defaults]\nsystem_prompt = 'say """ once'\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: 'an escaped quote before """', text: `[defaults]\nsystem_prompt = "a \\" and \\"\\"\\" b"\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: "''' in a multi-line basic string", text: `[defaults]\nsystem_prompt = """\nit's '''\nvision = 2\n"""\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: 'a multi-line string that ends in quotes', text: `[defaults]\nsystem_prompt = """\nsay ""x"""""\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: 'a multi-line literal string holding """ and a table header', text: `[defaults]\nsystem_prompt = '''\n"""\n[llm]\nmodel = 1\n'''\nvision = 1\n[llm]\nmodel = 5\n` },
    { name: 'a list over lines with comments and quotes', text: `[discord]\nallowed_users = [\n  "1", # """\n  '2', # '''\n]\n[defaults]\nsystem_prompt = "]"\nvision = 1\n[llm]\nmodel = 5\n` },
  ];
  for (const { name, text } of cases) {
    it(name, () => {
      const lines = text.split('\n');
      const expected = (pattern: RegExp) => lines.findLastIndex((line) => pattern.test(line)) + 1;
      const problems = problemsOf(text);
      assert.deepEqual(
        problems.map((problem) => [problem.path, problem.line]),
        [
          ['defaults.vision', expected(/^vision = 1$/)],
          ['llm.model', expected(/^model = 5$/)],
        ],
      );
    });
  }

  it('a quoted channel id with escapes is found on its own line', () => {
    const keyLines = new KeyLines('[defaults]\n\n[channels."1\\u0032\\n"]\nvision = true\n[channels.\'9\\n\']\n');
    assert.equal(keyLines.exactLineOf(['channels', '12\n']), 3);
    assert.equal(keyLines.exactLineOf(['channels', '12\n', 'vision']), 4);
    assert.equal(keyLines.exactLineOf(['channels', '9\\n']), 5);
  });

  it('keys of an inline table are found on its line', () => {
    const keyLines = new KeyLines('[defaults]\nvision = true\ncompaction = { background_threshold = "#", worker = { x = 1 } }\n');
    assert.equal(keyLines.exactLineOf(['defaults', 'compaction', 'background_threshold']), 3);
    assert.equal(keyLines.exactLineOf(['defaults', 'compaction', 'worker', 'x']), 3);
  });
});

/** Pieces a string may hold that could be mistaken for quotes, comments, keys or headers. */
const TRICKY = ["'''", "'", '"""', '"', '#', '= 1', '[t]', 'a = 1', '\\', ']', '}', ',', ' '];

/** A value's TOML text: it may span lines; it never holds a line break outside a string, list or table. */
const value: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    // A basic string: every quote and backslash escaped, plus escapes of its own.
    fc.array(fc.constantFrom(...TRICKY, '\\n', '\\u0041', '\\t')).map((parts) =>
      `"${parts.map((part) => (part.startsWith('\\') && part.length > 1 ? part : part.replace(/[\\"]/g, (char) => `\\${char}`))).join('x')}"`,
    ),
    // A literal string: anything but an apostrophe, as written.
    fc.array(fc.constantFrom(...TRICKY.filter((part) => !part.includes("'")))).map((parts) => `'${parts.join('x')}'`),
    // A multi-line basic string: line breaks and ''' as they are, quotes escaped, up to two quotes before the end.
    fc
      .tuple(fc.array(fc.constantFrom(...TRICKY, '\n', '\\\n  ')), fc.constantFrom('', '"', '""'))
      .map(([parts, end]) => `"""${parts.map((part) => (part === '\\\n  ' ? part : part.replace(/[\\"]/g, (char) => `\\${char}`))).join('x')}x${end}"""`),
    // A multi-line literal string: line breaks and """ as they are, no three apostrophes in a row.
    fc
      .tuple(fc.array(fc.constantFrom(...TRICKY.filter((part) => part !== "'''"), '\n')), fc.constantFrom('', "'", "''"))
      .map(([parts, end]) => `'''${parts.join('x')}x${end}'''`),
    fc.constantFrom('1', '-0.5', 'true', 'inf', '1979-05-27', '1979-05-27 07:32:00Z', '0x1F'),
    // A list over lines, with comments between its items.
    fc
      .array(fc.tuple(tie('value'), fc.constantFrom('', ' # """ \'\'\' ]', '\n')), { maxLength: 3 })
      .map((items) => `[${items.map(([item, after]) => `\n  ${item},${after}`).join('')}\n]`),
  ),
})).value;

/** One line (or more) of a generated file, with the path of the key or table it holds. */
type Piece = { kind: 'table'; text: string; segments: string[] } | { kind: 'key'; text: string; segments: string[] } | { kind: 'other'; text: string };

function keyText(segments: string[], style: number): string {
  return segments
    .map((segment, index) => {
      const pick = (style + index) % 3;
      if (pick === 0 && /^[A-Za-z0-9_-]+$/.test(segment)) return segment;
      if (pick === 1 && !/['\n]/.test(segment)) return `'${segment}'`;
      return JSON.stringify(segment);
    })
    .join(pick2(style));
}

function pick2(style: number): string {
  return style % 2 === 0 ? '.' : ' . ';
}

const piece: fc.Arbitrary<(index: number) => Piece> = fc.oneof(
  fc.tuple(fc.nat(5), fc.constantFrom('', ' # [x] """')).map(([style, comment]) => (index: number): Piece => {
    const segments = [`t${index}`, ...(style % 2 === 0 ? [] : [`sub ${index}"'`])];
    return { kind: 'table', text: `[${keyText(segments, style)}]${comment}`, segments };
  }),
  fc.tuple(fc.nat(5), value, fc.constantFrom('', ' # """', " # '''", ' # a = 1')).map(([style, text, comment]) => (index: number): Piece => {
    const segments = style % 3 === 2 ? [`d${index}`, `e ${index}`] : [`k${index}\u00e9`];
    return { kind: 'key', text: `${keyText(segments, style)} = ${text}${comment}`, segments };
  }),
  fc.constantFrom('', '# """', "# '''", '  # x = """', '#[t]').map((text) => (): Piece => ({ kind: 'other', text })),
);

describe('KeyLines on generated files', () => {
  it('places every key and table header on the line it starts on', () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 25 }), fc.boolean(), (makers, crlf) => {
        const pieces = makers.map((make, index) => make(index));
        const newline = crlf ? '\r\n' : '\n';
        let table: string[] = [];
        let line = 1;
        const expected: Array<{ path: string[]; line: number }> = [];
        for (const entry of pieces) {
          if (entry.kind === 'table') {
            table = entry.segments;
            expected.push({ path: table, line });
          } else if (entry.kind === 'key') {
            expected.push({ path: [...table, ...entry.segments], line });
          }
          line += entry.text.split('\n').length;
        }
        const text = pieces.map((entry) => entry.text).join(newline);
        // The generator writes valid TOML only: the scanner is never given anything else.
        parse(text);
        const keyLines = new KeyLines(text);
        for (const { path, line: at } of expected) {
          assert.equal(keyLines.exactLineOf(path), at, `${JSON.stringify(path)} in\n${text}`);
        }
      }),
      { numRuns: 400 },
    );
  });
});
