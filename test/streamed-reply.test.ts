import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { chunkMessage } from '../src/discord/chunk-message.js';
import { closeOpenFence, StreamedReply, type PartPoster, type StreamClock } from '../src/discord/streamed-reply.js';

const INTERVAL = 1000;

/** A virtual clock: sleeping moves time forward at once. */
function virtualClock(): StreamClock & { advance(ms: number): void } {
  let now = 0;
  return {
    now: () => now,
    sleep: async (ms) => {
      now += ms;
      await Promise.resolve();
    },
    advance: (ms) => {
      now += ms;
    },
  };
}

interface Operation {
  kind: 'post' | 'edit' | 'remove';
  id: string;
  content?: string;
  at: number;
}

function recordingPoster(clock: StreamClock): PartPoster & { operations: Operation[]; visible(): string[] } {
  const operations: Operation[] = [];
  const screen = new Map<string, string>();
  let counter = 0;
  return {
    operations,
    async post(content) {
      await Promise.resolve();
      counter += 1;
      const id = `m${counter}`;
      screen.set(id, content);
      operations.push({ kind: 'post', id, content, at: clock.now() });
      return id;
    },
    async edit(id, content) {
      await Promise.resolve();
      assert.ok(screen.has(id), `edit of a message that is not on screen: ${id}`);
      screen.set(id, content);
      operations.push({ kind: 'edit', id, content, at: clock.now() });
    },
    async remove(id) {
      await Promise.resolve();
      screen.delete(id);
      operations.push({ kind: 'remove', id, at: clock.now() });
    },
    visible: () => [...screen.values()],
  };
}

/** Text that stresses the chunker: code fences with languages, long lines, long words, blank lines. */
const pieceArbitrary = fc.oneof(
  fc.constantFrom('```js\n', '```\n', '```python\n', '\n', '\n\n', ' ', 'end of a sentence. '),
  fc.string({ minLength: 1, maxLength: 80 }),
  fc.integer({ min: 100, max: 2600 }).map((length) => 'x'.repeat(length)),
  fc.integer({ min: 5, max: 60 }).map((words) => Array.from({ length: words }, (_, index) => `word${index}`).join(' ')),
);

const scenarioArbitrary = fc.record({
  pieces: fc.array(pieceArbitrary, { minLength: 1, maxLength: 40 }),
  /** Per delta: how far the clock moves before it (ms) and how many event-loop turns pass. */
  gaps: fc.array(fc.record({ ms: fc.integer({ min: 0, max: 1500 }), turns: fc.integer({ min: 0, max: 3 }) }), { minLength: 1, maxLength: 40 }),
});

async function turns(count: number): Promise<void> {
  for (let index = 0; index < count; index += 1) await new Promise((resolve) => setImmediate(resolve));
}

function checkSpacing(operations: readonly Operation[]): void {
  const lastWrite = new Map<string, number>();
  for (const operation of operations) {
    if (operation.kind === 'remove') continue;
    const previous = lastWrite.get(operation.id);
    if (previous !== undefined) {
      assert.ok(operation.at - previous >= INTERVAL, `message ${operation.id} written ${operation.at - previous} ms after its previous write`);
    }
    lastWrite.set(operation.id, operation.at);
  }
}

async function streamScenario(scenario: { pieces: string[]; gaps: Array<{ ms: number; turns: number }> }) {
  const clock = virtualClock();
  const poster = recordingPoster(clock);
  const reply = new StreamedReply({ poster, clock, editIntervalMs: INTERVAL });
  let text = '';
  for (const [index, piece] of scenario.pieces.entries()) {
    const gap = scenario.gaps[index % scenario.gaps.length]!;
    clock.advance(gap.ms);
    text += piece;
    reply.update(text);
    await turns(gap.turns);
  }
  return { clock, poster, reply, text };
}

test('property: streamed parts always end in exactly the final chunking, edits spaced by the interval, nothing posted twice', async () => {
  await fc.assert(
    fc.asyncProperty(scenarioArbitrary, async (scenario) => {
      const { poster, reply, text } = await streamScenario(scenario);
      const firstId = await reply.finish(text);
      const expected = text.trim() === '' ? [] : chunkMessage(text);
      assert.deepEqual(poster.visible(), expected);
      checkSpacing(poster.operations);
      const posts = poster.operations.filter((operation) => operation.kind === 'post');
      assert.equal(new Set(posts.map((post) => post.id)).size, posts.length);
      const removes = poster.operations.filter((operation) => operation.kind === 'remove').length;
      assert.equal(posts.length - removes, expected.length, 'every post is on screen at the end or was removed when finishing');
      assert.equal(firstId, expected.length === 0 ? undefined : posts[0]!.id);
    }),
    { numRuns: 120 },
  );
});

test('property: a final text that differs from the streamed one (words before a tool call kept, answer rewritten) still ends exactly in its chunking', async () => {
  await fc.assert(
    fc.asyncProperty(scenarioArbitrary, fc.array(pieceArbitrary, { minLength: 1, maxLength: 10 }), async (scenario, finalPieces) => {
      const { poster, reply } = await streamScenario(scenario);
      const final = finalPieces.join('');
      await reply.finish(final);
      assert.deepEqual(poster.visible(), final.trim() === '' ? [] : chunkMessage(final));
      checkSpacing(poster.operations);
    }),
    { numRuns: 60 },
  );
});

test('property: a stream that breaks ends with the note after what was generated, fences closed, and nothing more', async () => {
  const note = '*(cut off)*';
  await fc.assert(
    fc.asyncProperty(scenarioArbitrary, async (scenario) => {
      const { poster, reply, text } = await streamScenario(scenario);
      const shown = await reply.fail(note);
      if (text.trim() === '') {
        assert.equal(shown, false);
        assert.deepEqual(poster.visible(), []);
        return;
      }
      assert.equal(shown, true);
      const expected = chunkMessage(`${closeOpenFence(text.trimEnd())}\n\n${note}`);
      assert.deepEqual(poster.visible(), expected);
      assert.ok(poster.visible().at(-1)!.endsWith(note), 'the last part ends with the note, outside any code block');
      checkSpacing(poster.operations);
      const count = poster.operations.length;
      reply.update(`${text} more`);
      await turns(3);
      assert.equal(poster.operations.length, count, 'nothing changes after the stream has ended');
    }),
    { numRuns: 60 },
  );
});

test('the first part is posted as soon as there is text; later growth is an edit no sooner than the interval', async () => {
  const clock = virtualClock();
  const poster = recordingPoster(clock);
  const reply = new StreamedReply({ poster, clock, editIntervalMs: INTERVAL });
  reply.update('Hel');
  await turns(2);
  assert.deepEqual(poster.operations.map((operation) => [operation.kind, operation.content]), [['post', 'Hel']]);
  reply.update('Hello');
  reply.update('Hello there');
  await turns(3);
  await reply.finish('Hello there.');
  assert.deepEqual(poster.visible(), ['Hello there.']);
  const edits = poster.operations.filter((operation) => operation.kind === 'edit');
  assert.ok(edits.length >= 1 && edits.length <= 2, `edits: ${edits.length}`);
  assert.ok(edits[0]!.at >= INTERVAL);
});

test('closeOpenFence closes only a fence the text leaves open', () => {
  assert.equal(closeOpenFence('a\n```js\ncode'), 'a\n```js\ncode\n```');
  assert.equal(closeOpenFence('```js\ncode\n```'), '```js\ncode\n```');
  assert.equal(closeOpenFence('inline ```sh ls``` done'), 'inline ```sh ls``` done');
});

test('a failed write is reported by finish, and a stream never shown declines to add a note', async () => {
  const clock = virtualClock();
  const reply = new StreamedReply({
    clock,
    poster: {
      post: async () => {
        throw new Error('Missing Permissions');
      },
      edit: async () => {},
      remove: async () => {},
    },
  });
  reply.update('partial');
  await turns(2);
  await assert.rejects(reply.finish('partial answer'), /Missing Permissions/);
  const never = new StreamedReply({ clock, poster: recordingPoster(clock) });
  assert.equal(await never.fail('note'), false);
});

test('a redaction that changes mid-stream edits every part shown, leaves fewer parts when the text shrinks, and still applies after finish', async () => {
  const clock = virtualClock();
  const poster = recordingPoster(clock);
  const gone = new Set<string>();
  const redact = (text: string): string => [...gone].reduce((result, word) => result.replaceAll(word, '[deleted message]'), text);
  const reply = new StreamedReply({ poster, clock, chunk: (text) => chunkMessage(text, 40), redact });
  const secret = 'SECRET-'.repeat(8);
  reply.update(`a ${secret} b`);
  await reply.refresh();
  assert.ok(poster.visible().join('').includes('SECRET'), 'shown as written before the change');
  assert.ok(poster.visible().length >= 2, 'in several parts');
  gone.add(secret);
  await reply.refresh();
  assert.deepEqual(poster.visible(), chunkMessage('a [deleted message] b', 40), 'every part follows; surplus parts go');
  reply.update(`a ${secret} b and ${secret} again`);
  await reply.finish(`a ${secret} b and ${secret} again, the end`);
  assert.deepEqual(poster.visible(), chunkMessage('a [deleted message] b and [deleted message] again, the end', 40), 'parts posted after the change never show it');
  gone.add('the end');
  await reply.refresh();
  assert.deepEqual(poster.visible(), chunkMessage('a [deleted message] b and [deleted message] again, [deleted message]', 40), 'a change after finish edits the finished reply');
  checkSpacing(poster.operations);
});
