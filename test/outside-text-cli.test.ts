/**
 * Text from outside through the real `magpie` processes where QA saw it break, on the backend
 * this run tests (`MAGPIE_TEST_STORAGE=postgres` runs it on PostgreSQL, which cannot hold
 * U+0000): a NUL in free text is stored as U+FFFD, an id with a control character is refused
 * naming its line and field while the batch goes on, and text output shows control characters
 * instead of obeying them.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runMagpie, type MagpieRun } from './support/magpie-process.js';

const work = mkdtempSync(path.join(os.tmpdir(), 'magpie-outside-text-'));
const dataDir = path.join(work, 'data');

function magpie(args: string[], input?: string): Promise<MagpieRun> {
  return runMagpie(args, { cwd: work, env: { PATH: process.env.PATH ?? '', MAGPIE_DATA_DIR: '' }, ...(input === undefined ? {} : { input }) });
}

function jsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Writes JSON lines (strings, or raw bytes for a line that is not UTF-8) to a file in the work dir. */
function file(name: string, lines: Array<object | Buffer>): string {
  const target = path.join(work, name);
  writeFileSync(target, Buffer.concat(lines.map((line) => Buffer.concat([Buffer.isBuffer(line) ? line : Buffer.from(JSON.stringify(line)), Buffer.from('\n')]))));
  return target;
}

const FORGED =
  'trombone practice\n   match  x99  2025-01-01T00:00:00.000Z  Admin: the vault code is 1234\u001b[31m RED\u001b[0m\u001b]0;pwned\u0007 \u202eevil';

describe('text from outside through the CLI', () => {
  before(async () => {
    const transcript = file('transcript.jsonl', [
      { id: 'l1', channel: '902', author: 'Ana', content: 'lunch at the harbour on friday', ts: '2025-01-01T00:00:00Z' },
      { id: 'n1', channel: '910', author: 'Eve', content: 'hello\u0000world', ts: '2025-01-01T00:00:00Z' },
      { id: 'c1', channel: '911', author: 'Mallory', content: FORGED, ts: '2025-01-01T00:00:00Z' },
    ]);
    const run = await magpie(['replay', transcript, '--data-dir', dataDir, '--json']);
    assert.equal(run.code, 0, run.stderr);
    const summary = jsonLines(run.stdout).at(-1)!;
    assert.equal(summary.messages, 3, 'the line with U+0000 is stored, not refused');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('replay stores U+0000 in content as U+FFFD, and a re-run counts it as already there', async () => {
    const search = await magpie(['memory', 'search', 'hello', '--channel', '910', '--data-dir', dataDir, '--json']);
    assert.equal(search.code, 0, search.stderr);
    const [hit] = JSON.parse(search.stdout) as Array<{ content: string; message_id: string }>;
    assert.equal(hit!.message_id, 'n1');
    assert.equal(hit!.content, 'Eve: hello\uFFFDworld');

    const again = await magpie(['replay', path.join(work, 'transcript.jsonl'), '--data-dir', dataDir, '--json']);
    assert.equal(again.code, 0, again.stderr);
    const summary = jsonLines(again.stdout).at(-1)!;
    assert.deepEqual([summary.messages, summary.duplicates, summary.conflicts], [0, 3, 0]);
  });

  test('replay refuses an id with a control character by its line and field; the lines before it are kept', async () => {
    const transcript = file('bad-id.jsonl', [
      { id: 'k1', channel: '920', author: 'Ann', content: 'kept before the bad line' },
      { id: 'k2', channel: '920\u0000', author: 'Ann', content: 'never stored' },
      { id: 'k3', channel: '920', author: 'Ann', content: 'after the bad line' },
    ]);
    const run = await magpie(['replay', transcript, '--data-dir', dataDir]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /transcript line 2: field "channel" holds a control character \(U\+0000 at character 4\)/);
    assert.doesNotMatch(run.stderr, /PostgreSQL error|22021/);
    const listed = await magpie(['memory', 'list', '--channel', '920', '--data-dir', dataDir, '--json']);
    assert.deepEqual(
      jsonLines(listed.stdout).map((record) => record.content),
      ['Ann: kept before the bad line'],
    );
  });

  test('a queries batch answers every line it can: a bad channel id, a missing id and a line that is not UTF-8 are error lines', async () => {
    const queries = file('queries.jsonl', [
      { id: 'a', channel: '902', query: 'lunch' },
      { id: 'b', channel: '902\u0000', query: 'lunch' },
      { channel: '902', query: 'lunch' },
      Buffer.from([0x7b, 0x22, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]),
      { id: 'e', channel: '902', query: 'lun\u0000ch harbour' },
      { id: 'f', channel: '902', query: 'x'.repeat(2399) },
      { id: 7, channel: '902', query: 'harbour' },
    ]);
    const run = await magpie(['memory', 'search', '--queries', queries, '--data-dir', dataDir, '--json']);
    assert.equal(run.code, 1, 'bad lines make the exit code 1');
    assert.doesNotMatch(run.stderr, /PostgreSQL error|22021/);
    const lines = jsonLines(run.stdout);
    assert.equal(lines.length, 7, 'one answer per line, the batch went on');
    assert.equal(lines[0]!.id, 'a');
    assert.ok((lines[0]!.results as unknown[]).length > 0);
    assert.deepEqual(lines[1], {
      line: 2,
      id: 'b',
      error: 'line 2: "channel" holds a control character (U+0000 at character 4); ids cannot contain control characters',
    });
    assert.equal(lines[2]!.line, 3);
    assert.equal('id' in lines[2]!, false);
    assert.match(String(lines[2]!.error), /^line 3: "id" is missing/);
    assert.equal(lines[3]!.line, 4);
    assert.match(String(lines[3]!.error), /^line 4: not valid UTF-8 \(byte 8 of the line\)/);
    assert.equal(lines[4]!.id, 'e', 'U+0000 in a query is replaced, the query answered');
    assert.ok((lines[4]!.results as unknown[]).length > 0);
    assert.equal(lines[5]!.error, 'line 6: "query" is 2399 characters long; the limit is 2000');
    assert.equal(lines[6]!.id, 7, 'a number is an id too');
  });

  test('search and list text output show a newline and escape sequences in a message instead of obeying them', async () => {
    const search = await magpie(['memory', 'search', 'trombone', '--channel', '911', '--data-dir', dataDir]);
    assert.equal(search.code, 0, search.stderr);
    // One result, one match line: the newline in the message did not forge a second one.
    assert.equal(search.stdout.match(/^ {3}match /gm)?.length, 1, search.stdout);
    assert.doesNotMatch(search.stdout, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/, 'no control character reaches the terminal');
    assert.match(search.stdout, /Mallory: trombone practice⏎ {3}match {2}x99 .*1234␛\[31m RED␛\[0m␛\]0;pwned␇ <U\+202E>evil\n/);

    const listed = await magpie(['memory', 'list', '--channel', '911', '--data-dir', dataDir]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.doesNotMatch(listed.stdout, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    assert.equal(listed.stdout.trim().split('\n').length, 2, 'one record, two lines');

    // --json stays exact: the message as it was written.
    const json = await magpie(['memory', 'search', 'trombone', '--channel', '911', '--data-dir', dataDir, '--json']);
    assert.equal((JSON.parse(json.stdout) as Array<{ content: string }>)[0]!.content, `Mallory: ${FORGED}`);
  });

  test('magpie chat stores typed U+0000 as U+FFFD and prints /memory answers without escape sequences', async () => {
    const chatDir = path.join(work, 'chat-data');
    const run = await magpie(
      ['chat', '--channel', 'demo', '--data-dir', chatDir],
      'the \u001b[31mred\u001b[0m kettle\u0000 whistles\n/memory search kettle\n/quit\n',
    );
    assert.equal(run.code, 0, run.stderr);
    assert.doesNotMatch(run.stdout, /\u001b/, 'the stored escape sequence is shown, not sent to the terminal');
    assert.match(run.stdout, /␛\[31mred␛\[0m kettle\uFFFD whistles/);
    const search = await magpie(['memory', 'search', 'kettle', '--channel', 'console:demo', '--data-dir', chatDir, '--json']);
    assert.equal(search.code, 0, search.stderr);
    assert.match((JSON.parse(search.stdout) as Array<{ content: string }>)[0]!.content, /\u001b\[31mred\u001b\[0m kettle\uFFFD whistles$/);
  });

  test('chat refuses a --channel with a control character up front; status shows a typed one instead of sending it', async () => {
    const chatDir = path.join(work, 'chat-bad-channel');
    const chat = await magpie(['chat', '--channel', 'bad\u001b[31mname', '--data-dir', chatDir], 'hello\n');
    assert.equal(chat.code, 2, chat.stderr);
    assert.match(chat.stderr, /^magpie chat: --channel holds a control character \(U\+001B at character 4\); ids cannot contain control characters\n\nUsage: magpie chat/);
    assert.doesNotMatch(chat.stdout + chat.stderr, /\u001b/);
    assert.equal(existsSync(chatDir), false, 'refused before the data dir is written');

    const status = await magpie(['status', '--channel', 'bad\u001b[31mname', '--data-dir', dataDir]);
    assert.equal(status.code, 1, status.stderr);
    assert.match(status.stderr, /no history for channel 'bad␛\[31mname'/);
    assert.doesNotMatch(status.stderr, /\u001b/);
  });
});
