import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkConfigText, parseConfigText } from '../src/config/index.js';
import { MAX_PERSONA_CHARS, validatePersona } from '../src/persona/index.js';

test('the chat switches have documented defaults and may be set per channel', () => {
  const config = parseConfigText('[channels."42"]\nstream_replies = false\nvision = false\nmax_images_per_message = 1\nmax_attachment_chars = 500\n');
  assert.equal(config.defaults.streamReplies, true);
  assert.equal(config.defaults.vision, true);
  assert.equal(config.defaults.maxImagesPerMessage, 4);
  assert.equal(config.defaults.maxAttachmentChars, 20_000);
  const channel = config.channels['42']!;
  assert.deepEqual(
    [channel.streamReplies, channel.vision, channel.maxImagesPerMessage, channel.maxAttachmentChars],
    [false, false, 1, 500],
  );
});

test('garbage in the chat switches is refused with the key named', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['stream_replies = "yes"', 'defaults.stream_replies', /true or false/],
    ['vision = 1', 'defaults.vision', /true or false/],
    ['max_images_per_message = 50', 'defaults.max_images_per_message', /between 0 and 20/],
    ['max_images_per_message = 2.5', 'defaults.max_images_per_message', /whole number/],
    ['max_attachment_chars = -1', 'defaults.max_attachment_chars', /between 0 and 1000000/],
    ['max_attachment_chars = "lots"', 'defaults.max_attachment_chars', /whole number/],
    ['stream_reply = true', 'defaults.stream_reply', /unknown key/],
  ];
  for (const [line, key, message] of cases) {
    const result = checkConfigText(`[defaults]\n${line}\n`);
    assert.equal(result.ok, false, line);
    const problem = result.ok ? undefined : result.problems.find((candidate) => candidate.path === key);
    assert.ok(problem, `${line}: ${JSON.stringify(result)}`);
    assert.match(problem.message, message);
  }
});

test('a persona must be text, not blank, and not longer than the limit', () => {
  assert.equal(validatePersona('  You are kind.  '), 'You are kind.');
  assert.throws(() => validatePersona(''), /empty/);
  assert.throws(() => validatePersona(42), /must be text/);
  assert.throws(() => validatePersona('x'.repeat(MAX_PERSONA_CHARS + 1)), /at most 4000/);
});
