import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { chunkMessage, chunkParts } from '../src/discord/chunk-message.js';

/** Fence markers as Discord counts them: "```" left to right, without overlaps. */
function markerCount(text: string): number {
  return text.split('```').length - 1;
}

/**
 * The fence state at `position`, computed independently of the chunker from the text before it:
 * open when an odd number of markers precede it; its info string is the word after the last
 * marker when nothing else follows on that line.
 */
function fenceAt(text: string, position: number): { open: boolean; info: string } {
  const before = text.slice(0, position);
  const open = markerCount(before) % 2 === 1;
  if (!open) return { open, info: '' };
  let marker = -1;
  for (let at = before.indexOf('```'); at >= 0; at = before.indexOf('```', at + 3)) marker = at;
  const lineEnd = text.indexOf('\n', marker);
  const rest = text.slice(marker + 3, lineEnd < 0 ? text.length : lineEnd).replace(/\r$/, '').trim();
  return { open, info: /^[\w+#.-]*$/.test(rest) ? rest : '' };
}

/** Every promise of the chunker, checked for one input. */
function checkChunks(text: string, limit: number): void {
  const parts = chunkParts(text, limit);
  assert.deepEqual(chunkMessage(text, limit), parts.map((part) => part.text));
  let covered = 0;
  for (const [index, part] of parts.entries()) {
    assert.ok(part.text.length > 0 && part.text.length <= limit, `part ${index} has ${part.text.length} chars (limit ${limit})`);
    assert.ok(part.text.trim().length > 0, `part ${index} is blank`);
    assert.equal(markerCount(part.text) % 2, 0, `part ${index} has unbalanced fences: ${JSON.stringify(part.text)}`);
    // What lies between parts (dropped at a cut) is whitespace only: nothing of the text is lost.
    assert.match(text.slice(covered, part.start), /^\s*$/u, `text lost before part ${index}`);
    assert.match(text.slice(part.contentEnd, part.end), /^\s*$/u, `text lost after part ${index}`);
    assert.ok(part.start < part.contentEnd && part.contentEnd <= part.end);
    // The part is exactly the text's slice plus the fence lines added around it.
    const expectedFence = fenceAt(text, part.start);
    assert.equal(part.reopen !== undefined, expectedFence.open, `part ${index} reopen`);
    if (part.reopen !== undefined) {
      assert.ok(part.reopen.startsWith('```'));
      const info = part.reopen.slice(3);
      assert.ok(expectedFence.info.startsWith(info), `reopened with ${JSON.stringify(info)}, fence has ${JSON.stringify(expectedFence.info)}`);
      assert.ok(info.length === expectedFence.info.length || info.length >= Math.floor(limit / 4) - 4, 'info shortened only when it must be');
    }
    const closedAtCut = fenceAt(text, part.end).open;
    assert.equal(part.close, closedAtCut, `part ${index} close`);
    const body = text.slice(part.start, part.contentEnd);
    assert.equal(part.text, `${part.reopen === undefined ? '' : `${part.reopen}\n`}${body}${part.close ? '\n```' : ''}`);
    // Never between the halves of an astral character.
    const high = text.charCodeAt(part.end - 1);
    const low = text.charCodeAt(part.end);
    assert.ok(!(high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff), 'surrogate pair split');
    covered = part.end;
  }
  assert.match(text.slice(covered), /^\s*$/u, 'text lost at the end');
}

const info = fc.oneof(
  fc.constantFrom('', 'ts', 'python', 'c++', 'shell session follows', ' js ', 'y'.repeat(2000)),
  fc.stringMatching(/^[\w+#.-]{0,80}$/),
);
const fragment = fc.oneof(
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
  { weight: 3, arbitrary: info.map((text) => `\`\`\`${text}`) },
  { weight: 2, arbitrary: fc.constantFrom('\n', '\r\n', '\n\n', ' ', '   ', '\t') },
  { weight: 1, arbitrary: fc.constantFrom('`', '``', '````', '``````', '😀', '𝄞', '<@123456789012345678>', '<#42>', '<a:party:987654321>', '@everyone') },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('x', ' ', 'word ', '😀', '`', '\n', 'ab\r\n'), fc.integer({ min: 1, max: 1200 }))
      .map(([unit, count]) => unit.repeat(count)),
  },
);
const text = fc.array(fragment, { maxLength: 60 }).map((fragments) => fragments.join(''));
const limit = fc.oneof(fc.integer({ min: 32, max: 200 }), fc.constantFrom(2000, 500, 64));

test('property: every part fits, balances its fences and maps back onto the text', () => {
  fc.assert(
    fc.property(text, limit, (input, max) => checkChunks(input, max)),
    { numRuns: 3000 },
  );
});

test('property: the Discord limit with long generated replies', () => {
  const long = fc.array(fragment, { minLength: 20, maxLength: 200 }).map((fragments) => fragments.join(''));
  fc.assert(
    fc.property(long, (input) => checkChunks(input, 2000)),
    { numRuns: 300 },
  );
});

test('regression: a fence opened mid-line with a 2,000-character info string', () => {
  const input = 'see ```' + 'y'.repeat(2000) + '\n' + 'z'.repeat(2000);
  const chunks = chunkMessage(input);
  checkChunks(input, 2000);
  assert.ok(chunks.length >= 3);
  for (const chunk of chunks) assert.ok(chunk.length <= 2000);
  // The reopened fences carry the language, shortened to leave room for the code.
  assert.ok(chunks.slice(1).every((chunk) => /^```y+\n/.test(chunk)));
  assert.ok(chunks.slice(1).every((chunk) => chunk.indexOf('\n') <= 500));
  // Nothing is lost: the parts' own text, joined, is the input without the whitespace at cuts.
  const carried = chunkParts(input).map((part) => input.slice(part.start, part.contentEnd)).join('');
  assert.equal(carried.replace(/\s/g, ''), input.replace(/\s/g, ''));
});

test('a reply that opens with a code block whose first line is huge sends no empty block', () => {
  const input = '```js\n' + 'const x = 1; '.repeat(400);
  const chunks = chunkMessage(input);
  checkChunks(input, 2000);
  for (const chunk of chunks) assert.notEqual(chunk.replace(/```[\w]*/g, '').trim(), '', `empty block: ${chunk}`);
});

test('a long line that opens a fence mid-line keeps every part balanced', () => {
  const input = `${'word '.repeat(500)}\`\`\`python\nprint(1)\n${'more '.repeat(500)}`;
  checkChunks(input, 2000);
  checkChunks(input, 100);
});

test('large adversarial inputs finish (one pass over the text)', () => {
  const inputs = [
    '```'.repeat(200_000),
    '``` '.repeat(100_000),
    'x'.repeat(1_000_000),
    ('<@123456789012345678>'.repeat(40) + '\n').repeat(500),
    '```' + 'y'.repeat(300_000),
    ' '.repeat(500_000) + 'end',
  ];
  for (const input of inputs) {
    const chunks = chunkMessage(input);
    for (const chunk of chunks) {
      assert.ok(chunk.length <= 2000);
      assert.equal(markerCount(chunk) % 2, 0);
    }
  }
});
