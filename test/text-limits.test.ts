/**
 * Limits on stored and searched text count characters (code points): an emoji is one, and text
 * cut to a limit never ends in half of one.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { firstCharacters } from '../src/memory/validation.js';

test('firstCharacters keeps whole characters: a prefix of at most the limit, never half a pair', () => {
  assert.equal(firstCharacters('😀😀😀', 2), '😀😀');
  assert.equal(firstCharacters('ab😀c', 3), 'ab😀');
  assert.equal(firstCharacters('short', 10), 'short');
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), fc.nat({ max: 80 }), (text, limit) => {
      const cut = firstCharacters(text, limit);
      const characters = Array.from(text);
      assert.ok(text.startsWith(cut));
      assert.equal(Array.from(cut).length, Math.min(limit, characters.length));
      assert.equal(cut, characters.slice(0, limit).join(''));
    }),
    { numRuns: 300 },
  );
});
