/**
 * Transcript input checks through the real `magpie replay` process: invalid UTF-8 is an error
 * naming the line (or, with --accept-invalid-utf8, replaced and reported), and a reused id with
 * other text is a reported conflict, never a silent drop.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { firstInvalidByte, MAX_LINE_BYTES, utf8Lines } from '../src/cli/utf8-lines.js';
import { projectRoot, runMagpie } from './support/magpie-process.js';
import { openTestDatabase } from './support/storage.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-replay-input-'));
after(() => rmSync(root, { recursive: true, force: true }));
const env = { PATH: process.env.PATH ?? '' };
let count = 0;
function file(content: Buffer | string): string {
  count += 1;
  const name = path.join(root, `t${count}.jsonl`);
  writeFileSync(name, content);
  return name;
}

function line(id: string, content: string, channel = 'c1'): string {
  return JSON.stringify({ id, channel, author: 'ann', content });
}

async function stored(dataDir: string): Promise<Array<{ message_id: string; content: string }>> {
  const db = await openTestDatabase(dataDir);
  try {
    return (await db.prepare("SELECT message_id, content FROM history_entries WHERE channel_id = 'c1' ORDER BY seq").all()) as Array<{
      message_id: string;
      content: string;
    }>;
  } finally {
    await db.close();
  }
}

describe('replay input checks', { timeout: 120_000 }, () => {
  const invalid = Buffer.concat([
    Buffer.from(`${line('m1', 'fine')}\n`),
    Buffer.from('{"id":"m2","channel":"c1","author":"ann","content":"caf'),
    Buffer.from([0xe9]), // Latin-1 "é": not UTF-8
    Buffer.from('"}\n'),
    Buffer.from(`${line('m3', 'after')}\n`),
  ]);

  test('invalid UTF-8 stops the replay with an error naming the line; what came before is kept', async () => {
    const dataDir = path.join(root, 'strict');
    const run = await runMagpie(['replay', file(invalid), '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env });
    assert.equal(run.code, 1);
    assert.match(run.stderr, /transcript line 2: is not valid UTF-8 \(byte 56 of the line\)/);
    assert.match(run.stderr, /--accept-invalid-utf8/);
    assert.deepEqual((await stored(dataDir)).map((row) => row.message_id), ['m1']);
  });

  test('--accept-invalid-utf8 replaces the bad bytes, says which line, and counts it', async () => {
    const dataDir = path.join(root, 'lenient');
    const run = await runMagpie(['replay', file(invalid), '--data-dir', dataDir, '--json', '--accept-invalid-utf8'], { cwd: projectRoot(), env });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /line 2: not valid UTF-8; bad bytes replaced with U\+FFFD/);
    const summary = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { messages: number; invalid_utf8_lines: number };
    assert.equal(summary.messages, 3);
    assert.equal(summary.invalid_utf8_lines, 1);
    assert.equal((await stored(dataDir))[1]!.content, 'caf\uFFFD');
  });

  test('a reused id with other text is a conflict on stderr and in replay_summary; the same text is a duplicate', async () => {
    const dataDir = path.join(root, 'conflicts');
    const transcript = file([line('m1', 'original'), line('m2', 'second'), line('m1', 'rewritten'), line('m2', 'second'), line('m1', 'other', 'c2')].join('\n'));
    const run = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /line 3: id "m1" in channel "c1" is already stored with other text; the stored text is kept/);
    assert.doesNotMatch(run.stderr, /line 4/);
    const summary = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as { messages: number; duplicates: number; conflicts: number };
    assert.deepEqual({ messages: summary.messages, duplicates: summary.duplicates, conflicts: summary.conflicts }, { messages: 3, duplicates: 1, conflicts: 1 });
    assert.deepEqual(await stored(dataDir), [
      { message_id: 'm1', content: 'original' },
      { message_id: 'm2', content: 'second' },
    ]);
    const readable = await runMagpie(['replay', transcript, '--data-dir', path.join(root, 'conflicts-text')], { cwd: projectRoot(), env });
    assert.match(readable.stdout, /1 reused an id with other text: conflicts, see stderr/);
  });

  test('a numeric id past 2^53 is a bad line saying to quote it, not a silent merge with its neighbour', async () => {
    const dataDir = path.join(root, 'big-ids');
    const transcript = file(
      [
        '{"id":42,"channel":"c1","author":"ann","content":"a small number is an id as it reads"}',
        '{"id":1234567890123456789,"channel":"c1","author":"ann","content":"first message"}',
        '{"id":1234567890123456790,"channel":"c1","author":"ann","content":"second, different message"}',
      ].join('\n'),
    );
    const run = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env });
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /transcript line 2: field "id" is a number past 2\^53 or not whole \(read as 1234567890123456800\), which JSON readers round; write the id as a string, in quotes/);
    assert.deepEqual(await stored(dataDir), [{ message_id: '42', content: 'a small number is an id as it reads' }]);
  });

  test('ts is ISO 8601 with a zone, a date, or epoch milliseconds: the same times whatever the machine\'s zone', async () => {
    const accepted: Array<[unknown, number]> = [
      ['2024-03-25T14:02:11Z', Date.UTC(2024, 2, 25, 14, 2, 11)],
      ['2024-03-25T14:02:11.337000+00:00', Date.UTC(2024, 2, 25, 14, 2, 11, 337)],
      ['2024-03-25T23:02:11+09:00', Date.UTC(2024, 2, 25, 14, 2, 11)],
      ['2024-03-25T14:02-01:30', Date.UTC(2024, 2, 25, 15, 32)],
      ['2024-03-25', Date.UTC(2024, 2, 25)],
      [1_711_375_331_000, 1_711_375_331_000],
    ];
    const transcript = file(accepted.map(([ts], index) => JSON.stringify({ id: `t${index}`, channel: 'c1', author: 'ann', content: `at ${index}`, ts })).join('\n'));
    const times: number[][] = [];
    for (const zone of ['UTC', 'Asia/Tokyo', 'America/St_Johns']) {
      const dataDir = path.join(root, `zone-${zone.replace('/', '-')}`);
      const run = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: projectRoot(), env: { ...env, TZ: zone } });
      assert.equal(run.code, 0, run.stderr);
      const db = await openTestDatabase(dataDir);
      try {
        const rows = (await db.prepare("SELECT created_at FROM history_entries WHERE channel_id = 'c1' ORDER BY seq").all()) as Array<{ created_at: number }>;
        times.push(rows.map((row) => Number(row.created_at)));
      } finally {
        await db.close();
      }
    }
    for (const zoneTimes of times) assert.deepEqual(zoneTimes, accepted.map(([, time]) => time));

    for (const ts of ['2024-03-25T14:02:11', 'March 7, 2024', '12', '1711375331000', '2023-02-29', '2024-03-25T24:00:00Z', '2024-03-25 14:02:11Z']) {
      const dataDir = path.join(root, `bad-ts-${count}`);
      const run = await runMagpie(['replay', file(JSON.stringify({ id: 'm1', channel: 'c1', author: 'ann', content: 'x', ts })), '--data-dir', dataDir], {
        cwd: projectRoot(),
        env: { ...env, TZ: 'Asia/Tokyo' },
      });
      assert.equal(run.code, 1, `${ts}: ${run.stderr}`);
      assert.match(run.stderr, /transcript line 1: field "ts" must be an ISO 8601 time with its zone /, ts);
      assert.ok(run.stderr.includes(`, got ${JSON.stringify(ts)}`), run.stderr);
    }
  });

  test('a line over the length limit is refused by its number and length, with or without --accept-invalid-utf8', async () => {
    const head = '{"id":"m2","channel":"c1","author":"ann","content":"';
    const tail = '"}';
    const long = `${head}${'x'.repeat(MAX_LINE_BYTES + 1 - head.length - tail.length)}${tail}`;
    const transcript = file(`${line('m1', 'fine')}\n${long}\n${line('m3', 'after')}\n`);
    for (const lenient of [false, true]) {
      const dataDir = path.join(root, `long-line-${lenient}`);
      const run = await runMagpie(['replay', transcript, '--data-dir', dataDir, ...(lenient ? ['--accept-invalid-utf8'] : [])], { cwd: projectRoot(), env });
      assert.equal(run.code, 1, run.stderr);
      assert.match(run.stderr, new RegExp(`transcript line 2: is ${MAX_LINE_BYTES + 1} bytes long; the limit is ${MAX_LINE_BYTES} bytes \\(16 MiB\\)`));
      assert.doesNotMatch(run.stderr, /UTF-8|    at /, 'neither called invalid UTF-8 nor a stack trace');
      assert.deepEqual((await stored(dataDir)).map((row) => row.message_id), ['m1']);
    }
    // A queries file: that line gets its error object, the others their answers.
    const query = (id: string) => JSON.stringify({ id, channel: 'c1', query: 'fine' });
    const queries = file(`${query('q1')}\n${JSON.stringify({ id: 'q2', channel: 'c1', query: 'x'.repeat(MAX_LINE_BYTES) })}\n${query('q3')}\n`);
    const search = await runMagpie(['memory', 'search', '--queries', queries, '--data-dir', path.join(root, 'long-line-false'), '--json'], { cwd: projectRoot(), env });
    assert.equal(search.code, 1, search.stderr);
    const answers = search.stdout.trim().split('\n').map((text) => JSON.parse(text) as { id?: string; line?: number; error?: string });
    assert.deepEqual(answers.map((answer) => answer.id ?? answer.line), ['q1', 2, 'q3']);
    assert.match(answers[1]!.error!, new RegExp(`^line 2: is ${MAX_LINE_BYTES + 37} bytes long; the limit is ${MAX_LINE_BYTES} bytes`));
  });

  test('the UTF-8 line splitter agrees with a strict decoder on any bytes, whatever the chunking', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 24 }), { maxLength: 6 }), fc.integer({ min: 1, max: 7 }), async (parts, chunkSize) => {
        const lines = parts.map((part) => Buffer.from(part).filter((byte) => byte !== 0x0a && byte !== 0x0d));
        const bytes = Buffer.concat(lines.flatMap((part) => [part, Buffer.from('\n')]));
        const chunks: Buffer[] = [];
        for (let offset = 0; offset < bytes.length; offset += chunkSize) chunks.push(bytes.subarray(offset, offset + chunkSize));
        const seen: string[] = [];
        let failure: string | undefined;
        try {
          for await (const text of utf8Lines((async function* () { yield* chunks; })())) seen.push(text);
        } catch (error) {
          failure = (error as Error).message;
        }
        const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
        const firstBad = lines.findIndex((part) => {
          try {
            strict.decode(part);
            return false;
          } catch {
            return true;
          }
        });
        if (firstBad < 0) {
          assert.equal(failure, undefined);
          assert.deepEqual(seen, lines.map((part) => strict.decode(part)));
        } else {
          assert.match(failure ?? '', new RegExp(`^transcript line ${firstBad + 1}: is not valid UTF-8 \\(byte ${firstInvalidByte(lines[firstBad]!) + 1} `));
          assert.equal(seen.length, firstBad);
        }
      }),
      { numRuns: 300 },
    );
  });
});
