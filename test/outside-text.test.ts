/**
 * One rule for text from outside, on the backend this run tests (PostgreSQL with
 * MAGPIE_TEST_STORAGE=postgres, where `text` cannot hold U+0000): free text has U+0000 replaced
 * by U+FFFD where it enters the runtime or the store, ids with a control character are refused
 * naming the field. And the terminal display of stored text.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { normalizeIncoming } from '../src/channel/incoming-message.js';
import { InputError } from '../src/common/errors.js';
import { checkId, withoutNul } from '../src/common/outside-text.js';
import { terminalSafe, terminalSafeLines } from '../src/cli/terminal-text.js';
import type { IncomingMessage } from '../src/context/types.js';
import { createMemoryTools } from '../src/memory/tools.js';
import { withOfflineApp } from './support/offline-app.js';

const CHANNEL = 'c-outside';

function message(id: string, content: string, extra: Partial<IncomingMessage> = {}): IncomingMessage {
  return { messageId: id, channelId: CHANNEL, authorId: 'u-ana', authorName: 'Ana', role: 'user', content, createdAt: Date.UTC(2026, 0, 1), ...extra };
}


test('withoutNul replaces only U+0000; checkId names the field and the character', () => {
  assert.equal(withoutNul('a\u0000b\u0000'), 'a\uFFFDb\uFFFD');
  const clean = 'tab\there, é, 🦜';
  assert.equal(withoutNul(clean), clean, 'other characters, controls included, are free text as written');
  assert.equal(checkId('123456789012345678', 'channel id'), '123456789012345678');
  assert.throws(() => checkId('90\u00002', 'channel id'), (error: unknown) => {
    assert.ok(error instanceof InputError);
    assert.equal(error.message, 'channel id holds a control character (U+0000 at character 3); ids cannot contain control characters');
    return true;
  });
  assert.throws(() => checkId('a\nb', '"channel"'), /"channel" holds a control character \(U\+000A at character 2\)/);
  assert.throws(() => checkId('a\u0085', 'id'), /U\+0085/, 'C1 controls too');
  assert.throws(() => checkId('a\u007f', 'id'), /U\+007F/, 'and DEL');
});

test('normalizeIncoming checks every id field and cleans the free text, and is idempotent', () => {
  const cleaned = normalizeIncoming(message('m1', 'hi\u0000there', { authorName: 'A\u0000na' }));
  assert.equal(cleaned.content, 'hi\uFFFDthere');
  assert.equal(cleaned.authorName, 'A\uFFFDna');
  assert.deepEqual(normalizeIncoming(cleaned), cleaned);
  const clean = message('m2', 'nothing to change');
  assert.equal(normalizeIncoming(clean), clean, 'a clean message is passed through as it is');
  for (const field of ['messageId', 'channelId', 'authorId', 'guildId', 'dmUserId', 'parentChannelId', 'replyToMessageId'] as const) {
    assert.throws(() => normalizeIncoming(message('m3', 'x', { [field]: 'bad\u0000id' })), new RegExp(`message field "${field}" holds a control character`));
  }
});

test('the runtime stores U+0000 in a message, its author name, an edit and a reply as U+FFFD, and refuses a bad channel id before touching the store', async () => {
  await withOfflineApp('magpie-outside-', async (app) => {
    const { runtime, memory } = app;
    const entry = await runtime.ingest(message('m1', 'hello\u0000world', { authorName: 'A\u0000na' }));
    assert.equal(entry.content, 'hello\uFFFDworld');
    assert.equal(entry.authorName, 'A\uFFFDna');
    // Delivered again (a gateway replay): the same message, not a second one.
    assert.equal((await runtime.ingest(message('m1', 'hello\u0000world'))).seq, entry.seq);
    assert.equal((await runtime.status(CHANNEL)).archivedMessages, 1);

    const [hit] = await memory.search({ location: { channelId: CHANNEL }, query: 'hello\u0000world' });
    assert.equal(hit!.content, 'A\uFFFDna: hello\uFFFDworld');

    assert.equal(await runtime.editMessage(CHANNEL, 'm1', 'edited\u0000text'), true);
    assert.equal((await runtime.liveContext(CHANNEL)).entries[0]!.content, 'edited\uFFFDtext');
    const [edited] = await memory.search({ location: { channelId: CHANNEL }, query: 'edited' });
    assert.equal(edited!.content, 'A\uFFFDna: edited\uFFFDtext');

    const [reply] = await runtime.appendToTurn(
      CHANNEL,
      [{ kind: 'message', role: 'assistant', authorId: 'bot', authorName: 'Magpie', content: 'a reply\u0000', messageId: 'r1' }],
      entry.turnId,
    );
    assert.equal(reply!.content, 'a reply\uFFFD');

    await assert.rejects(runtime.ingest(message('m2', 'x', { channelId: '910\u0000' })), /message field "channelId" holds a control character \(U\+0000 at character 4\)/);
    await assert.rejects(runtime.ingest(message('m\n3', 'x')), /message field "messageId" holds a control character \(U\+000A/);
    assert.equal((await runtime.liveContext(CHANNEL)).entries.length, 2, 'nothing of the refused messages was taken in');
  });
});

test('the memory store: memory_save content and queries lose U+0000, a channel id with one is refused', async () => {
  await withOfflineApp('magpie-outside-', async (app) => {
    const tools = createMemoryTools(app.memory);
    const saved = await tools.memorySave.run({ content: 'Jo\u0000 likes tea', memory_type: 'preference' }, { channelId: CHANNEL });
    assert.equal(saved.isError, false, saved.content);
    const found = await tools.memorySearch.run({ query: 'tea\u0000' }, { channelId: CHANNEL });
    assert.equal(found.isError, false, found.content);
    assert.equal((JSON.parse(found.content) as Array<{ content: string }>)[0]!.content, 'Jo\uFFFD likes tea');

    await assert.rejects(app.memory.search({ location: { channelId: '902\u0000' }, query: 'tea' }), /channel id holds a control character/);
    const refused = await tools.memorySearch.run({ query: 'tea' }, { channelId: 'c\u001b' });
    assert.equal(refused.isError, true);
    assert.match(refused.content, /channel id holds a control character \(U\+001B/);
  });
});

test('terminalSafe shows every control character on one line; terminalSafeLines keeps newlines and tabs', () => {
  assert.equal(terminalSafe('a\nb\r\tc\u001b[31md\u0007\u007f\u0000'), 'a⏎b␍␉c␛[31md␇␡␀');
  assert.equal(terminalSafe('x\u0085y\u009bz'), 'x<U+0085>y<U+009B>z', 'C1 controls, which some terminals obey');
  assert.equal(terminalSafe('abc\u202edef\u2066g\u2069\u2028'), 'abc<U+202E>def<U+2066>g<U+2069><U+2028>', 'bidi overrides and isolates, line separators');
  const plain = 'Ünïcödé 🦜 — “quotes” \uFFFD';
  assert.equal(terminalSafe(plain), plain, 'printable text is left alone');
  assert.equal(terminalSafeLines('line 1\n\tline 2\r\u001b[2J'), 'line 1\n\tline 2␍␛[2J');
});
