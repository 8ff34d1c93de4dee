/**
 * One voice: every `--json` output and every log line follows docs/json-output.md — snake_case
 * keys at every depth, ISO 8601 times, level names. Each command runs as a real process.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { outputJson, snakeKey } from '../src/cli/json-output.js';
import { waitUntil } from './discord-helpers.js';
import pg from 'pg';
import { runMagpie, startMagpie } from './support/magpie-process.js';
import { freshSchema, requirePostgres } from './support/postgres-available.js';
import { TEST_DATABASE_URL } from './support/storage.js';

const SNAKE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Every place in `value` that breaks the convention, as `path: what`. */
function offences(value: unknown, where = '$', key = ''): string[] {
  const found: string[] = [];
  if ((key === 'at' || key === 'time' || key.endsWith('_at')) && value !== null && !(typeof value === 'string' && ISO.test(value))) {
    found.push(`${where}: a time that is not an ISO 8601 string (${JSON.stringify(value)})`);
  }
  if (Array.isArray(value)) value.forEach((item, index) => found.push(...offences(item, `${where}[${index}]`, key)));
  else if (value !== null && typeof value === 'object') {
    for (const [name, inner] of Object.entries(value)) {
      if (!SNAKE.test(name)) found.push(`${where}.${name}: not a snake_case key`);
      found.push(...offences(inner, `${where}.${name}`, name));
    }
  }
  return found;
}

function parseLines(text: string, what: string): unknown[] {
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  assert.ok(lines.length > 0, `${what} printed something`);
  return lines.map((line) => {
    try {
      return JSON.parse(line) as unknown;
    } catch {
      throw new assert.AssertionError({ message: `${what}: not a JSON line: ${line}` });
    }
  });
}

function assertVoice(text: string, what: string): unknown[] {
  const values = parseLines(text, what);
  const problems = values.flatMap((value, index) => offences(value, `${what} line ${index + 1}`));
  assert.deepEqual(problems, []);
  return values;
}

/** A log line also names its level and carries the event it reports. */
function assertLogLines(text: string, what: string): void {
  for (const line of assertVoice(text, what) as Array<Record<string, unknown>>) {
    assert.ok(['trace', 'debug', 'info', 'warn', 'error', 'fatal'].includes(String(line.level)), `${what}: level ${String(line.level)}`);
    assert.match(String(line.time), ISO, `${what}: time`);
    assert.equal(typeof line.event, 'string', `${what}: every line names its event: ${JSON.stringify(line)}`);
  }
}

test('the converter: camelCase keys to snake_case at every depth, epoch times under time keys to ISO', () => {
  assert.equal(snakeKey('memoriesDeleted'), 'memories_deleted');
  assert.equal(snakeKey('already_snake'), 'already_snake');
  assert.equal(snakeKey('700000000000000001'), '700000000000000001', 'ids are not keys to rename');
  assert.deepEqual(outputJson({ createdAt: 0, nested: [{ updatedAt: new Date(1000), byType: { fact: 1 } }], gone: undefined, at: 'x' }), {
    created_at: '1970-01-01T00:00:00.000Z',
    nested: [{ updated_at: '1970-01-01T00:00:01.000Z', by_type: { fact: 1 } }],
    at: 'x',
  });
});

test('every --json output of replay, memory, status and forget speaks with one voice', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-voice-'));
  const env = { PATH: process.env.PATH, HOME: dir };
  const data = path.join(dir, 'data');
  const run = async (args: string[], input?: string) => {
    const result = await runMagpie(args, { cwd: dir, env, ...(input === undefined ? {} : { input }) });
    assert.equal(result.code, 0, `${args.join(' ')}: ${result.stderr}`);
    return result;
  };
  try {
    const lines = Array.from({ length: 40 }, (_, index) =>
      JSON.stringify({
        id: `m${index}`,
        channel: index % 2 === 0 ? 'c1' : 'c2',
        author: index % 3 === 0 ? 'ann' : 'bo',
        content: `note ${index}: the harbour trip moves to thursday and the boat needs ${index} life jackets; ${'detail '.repeat(30)}`,
        ts: new Date(Date.UTC(2024, 2, 25, 12, index)).toISOString(),
      }),
    );
    writeFileSync(path.join(dir, 't.jsonl'), `${lines.join('\n')}\n`);

    const replay = await run(['replay', 't.jsonl', '--data-dir', data, '--context-window', '2000', '--json']);
    const events = assertVoice(replay.stdout, 'replay --json') as Array<{ type: string }>;
    assert.equal(events.at(-1)!.type, 'replay_summary');
    assert.ok(events.some((event) => event.type === 'compaction_completed'), 'the walk covers compaction events');

    const list = await run(['memory', 'list', '--data-dir', data, '--json']);
    const records = assertVoice(list.stdout, 'memory list --json') as Array<Record<string, unknown>>;
    assert.match(String(records[0]!.created_at), ISO);
    assert.equal(records[0]!.channel_id !== undefined, true);

    assertVoice((await run(['memory', 'search', 'life jackets', '--channel', 'c1', '--data-dir', data, '--json'])).stdout, 'memory search --json');
    const queries = `${JSON.stringify({ id: 'q1', channel: 'c2', query: 'harbour' })}\n{broken\n`;
    const batch = await runMagpie(['memory', 'search', '--queries', '-', '--data-dir', data, '--json'], { cwd: dir, env, input: queries });
    assert.equal(batch.code, 1, 'a bad line fails the run, after the others are answered');
    assertVoice(batch.stdout, 'memory search --queries --json');

    const stats = assertVoice((await run(['memory', 'stats', '--data-dir', data, '--json'])).stdout, 'memory stats --json');
    assert.equal(typeof (stats[0] as Record<string, unknown>).transcript_entries, 'number');
    assertVoice((await run(['status', '--data-dir', data, '--json'])).stdout, 'status --json');

    const item = assertVoice((await run(['memory', 'forget', 'm1', '--data-dir', data, '--json'])).stdout, 'memory forget ID --json')[0] as Record<string, unknown>;
    assert.match(String(item.id), /^msg-\d+$/);
    assert.deepEqual(item, { forgotten: true, id: item.id, kind: 'transcript', channel_id: 'c2', message_id: 'm1', matched: 'message_id', applied_by: 'command' });
    const forget = await run(['memory', 'forget', '--user', 'ann', '--data-dir', data, '--json']);
    const erased = assertVoice(forget.stdout, 'memory forget --user --json')[0] as Record<string, unknown>;
    assert.equal(erased.user_erased, true);
    assert.equal(typeof erased.memories_deleted, 'number');
    assert.equal(erased.applied_by, 'command');
    // The audit line is a log line like the bot's: pino, level name, ISO time, event.
    const audit = forget.stderr.split('\n').filter((line) => line.includes('"user_erased"')).join('\n');
    assertLogLines(audit, 'the user_erased audit line');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie start logs every line with level names, ISO times and snake_case fields', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-voice-'));
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  try {
    writeFileSync(path.join(dir, 'config.toml'), `[memory]\ndata_dir = "${path.join(dir, 'data')}"\n[metrics]\nlisten = "127.0.0.1:0"\n`);
    const bot = startMagpie(['start'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir, DISCORD_TOKEN: 'voice-token', MAGPIE_DISCORD_API: `http://127.0.0.1:${port}/api` },
    });
    await waitUntil(() => bot.output.stdout.includes('"discord_connect_retry"'), 'a retry line', 20_000);
    bot.child.kill('SIGTERM');
    assert.equal(await bot.exited, 0, bot.output.stderr);
    assertLogLines(bot.output.stdout, 'magpie start');
    assert.match(bot.output.stdout, /"event":"metrics_listening"/);
    assert.match(bot.output.stdout, /"event":"stopped"/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('migrate --json speaks with the same voice', async (context) => {
  if (!(await requirePostgres(context))) return;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-voice-'));
  const schema = freshSchema('t_voice');
  const env = { PATH: process.env.PATH, HOME: dir, MAGPIE_STORAGE_BACKEND: 'sqlite', MAGPIE_DATABASE_URL: TEST_DATABASE_URL, MAGPIE_STORAGE_SCHEMA: schema, MAGPIE_DATA_DIR: '' };
  try {
    const line = (index: number) => JSON.stringify({ id: `m${index}`, channel: 'c1', author: 'ann', content: `note ${index} about the harbour` });
    writeFileSync(path.join(dir, 't.jsonl'), `${[1, 2, 3].map(line).join('\n')}\n`);
    const data = path.join(dir, 'data');
    assert.equal((await runMagpie(['replay', 't.jsonl', '--data-dir', data], { cwd: dir, env })).code, 0);
    const migrated = await runMagpie(['migrate', '--to', 'postgres', '--data-dir', data, '--json'], { cwd: dir, env });
    assert.equal(migrated.code, 0, migrated.stderr);
    const [result] = assertVoice(migrated.stdout, 'migrate --json') as Array<Record<string, unknown>>;
    assert.equal(result!.committed, true);
    assert.equal(typeof result!.duration_ms, 'number');
  } finally {
    const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
    rmSync(dir, { recursive: true, force: true });
  }
});
