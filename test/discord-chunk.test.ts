import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chunkMessage } from '../src/discord/chunk-message.js';

function fenceCount(chunk: string): number {
  return chunk.split('\n').filter((line) => line.trimStart().startsWith('```')).length;
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((word) => word.length > 0 && !word.startsWith('```'));
}

function assertValid(chunks: string[], limit: number): void {
  for (const chunk of chunks) {
    assert.ok(chunk.length <= limit, `chunk of ${chunk.length} > ${limit}`);
    assert.ok(chunk.trim().length > 0, 'empty chunk');
    assert.equal(fenceCount(chunk) % 2, 0, `unbalanced fences in:\n${chunk}`);
  }
}

test('short text is one chunk, unchanged', () => {
  assert.deepEqual(chunkMessage('hello\nworld'), ['hello\nworld']);
  assert.deepEqual(chunkMessage(''), []);
  assert.deepEqual(chunkMessage('   \n  '), []);
});

test('exactly the limit stays one chunk; one more character splits', () => {
  const line = 'x'.repeat(2000);
  assert.deepEqual(chunkMessage(line), [line]);
  const chunks = chunkMessage(`${'a'.repeat(1000)}\n${'b'.repeat(1000)}`);
  assert.equal(chunks.length, 2);
  assert.deepEqual(chunks, ['a'.repeat(1000), 'b'.repeat(1000)]);
});

test('prose splits on line boundaries and keeps every word in order', () => {
  const lines = Array.from({ length: 300 }, (_, index) => `Line ${index} says something moderately long here.`);
  const text = lines.join('\n');
  const chunks = chunkMessage(text);
  assertValid(chunks, 2000);
  assert.ok(chunks.length > 1);
  for (const chunk of chunks) assert.ok(chunk.startsWith('Line '), 'chunk starts at a line start');
  assert.deepEqual(words(chunks.join('\n')), words(text));
});

test('a single very long line splits on word boundaries', () => {
  const text = Array.from({ length: 1200 }, (_, index) => `word${index}`).join(' ');
  const chunks = chunkMessage(text, 500);
  assertValid(chunks, 500);
  for (const chunk of chunks) assert.match(chunk, /^word\d+.*word\d+$/s);
  assert.deepEqual(words(chunks.join(' ')), words(text));
});

test('an unbreakable run is cut hard without splitting surrogate pairs', () => {
  const text = '😀'.repeat(1500); // 3000 UTF-16 units
  const chunks = chunkMessage(text, 999);
  assertValid(chunks, 999);
  assert.equal(chunks.join(''), text);
  for (const chunk of chunks) assert.ok(!/[\ud800-\udbff]$/.test(chunk));
});

test('code fences are closed and reopened with their language across chunks', () => {
  const code = Array.from({ length: 200 }, (_, index) => `  const value${index} = compute(${index});`).join('\n');
  const text = `Here is the code:\n\`\`\`ts\n${code}\n\`\`\`\nThat is all.`;
  const chunks = chunkMessage(text);
  assertValid(chunks, 2000);
  assert.ok(chunks.length >= 3);
  for (const chunk of chunks.slice(1, -1)) assert.ok(chunk.startsWith('```ts\n'), 'reopened with language');
  assert.ok(chunks[0]!.endsWith('\n```'));
  assert.ok(chunks.at(-1)!.endsWith('That is all.'));
  const restored = chunks.join('\n').replace(/\n```\n```ts\n/g, '\n');
  assert.equal(restored, text);
});

test('a fence left open by the text is closed in the last chunk', () => {
  const chunks = chunkMessage('```\nunterminated code');
  assert.deepEqual(chunks, ['```\nunterminated code\n```']);
});

test('5,000 characters of mixed prose and code become valid chunks', () => {
  const parts: string[] = [];
  let index = 0;
  while (parts.join('\n').length < 5000) {
    parts.push(`Paragraph ${index} explains a step in some detail, then shows code.`);
    parts.push('```python', ...Array.from({ length: 15 }, (_, line) => `print(${index} * ${line})  # step`), '```');
    index += 1;
  }
  const text = parts.join('\n');
  const chunks = chunkMessage(text);
  assertValid(chunks, 2000);
  assert.ok(chunks.length >= 3);
  assert.deepEqual(words(chunks.join('\n')), words(text));
});

test('a long line inside a fence is cut and the fence still balances', () => {
  const text = `\`\`\`\n${'token '.repeat(900)}\n\`\`\``;
  const chunks = chunkMessage(text, 600);
  assertValid(chunks, 600);
  for (const chunk of chunks) assert.ok(chunk.startsWith('```'));
});

test('limits that are too small are refused', () => {
  assert.throws(() => chunkMessage('text', 10), RangeError);
});

test('a fence opened and closed on one line does not leak into later chunks', () => {
  const prose = Array.from({ length: 60 }, (_, index) => `Sentence ${index} of the explanation.`).join('\n');
  const text = `Run \`\`\`sh ls -la\`\`\` first.\n\`\`\`npm test\`\`\`\n${prose}`;
  const chunks = chunkMessage(text, 400);
  for (const chunk of chunks) {
    assert.ok(chunk.length <= 400);
    assert.equal((chunk.split('```').length - 1) % 2, 0, `unbalanced fence markers in:\n${chunk}`);
  }
  assert.ok(chunks.length >= 3);
  // Nothing is repeated and nothing is wrapped in a code block that the text did not open.
  assert.equal(chunks.join('\n'), text);
  for (const chunk of chunks.slice(1)) assert.match(chunk, /^Sentence \d+/);
});

test('a fence closed at the end of a code line is closed for the chunker too', () => {
  const prose = Array.from({ length: 60 }, (_, index) => `Remark ${index} after the code.`).join('\n');
  const text = `\`\`\`js\nconst answer = 42;\nconsole.log(answer);\`\`\`\n${prose}`;
  const chunks = chunkMessage(text, 300);
  assert.ok(chunks.length >= 3);
  assert.equal(chunks.join('\n'), text);
  for (const chunk of chunks.slice(1)) assert.ok(!chunk.includes('```'), `no fence reopened in:\n${chunk}`);
});

test('a reopened fence repeats only its marker and language, not text from the opening line', () => {
  const code = Array.from({ length: 80 }, (_, index) => `step ${index}`).join('\n');
  const text = `\`\`\` shell session follows\n${code}\n\`\`\``;
  const chunks = chunkMessage(text, 200);
  assertValid(chunks, 200);
  assert.equal(chunks.join('\n').split('shell session follows').length - 1, 1);
  for (const chunk of chunks.slice(1)) assert.ok(chunk.startsWith('```\n'));
});
