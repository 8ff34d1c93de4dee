/**
 * `magpie memory forget` beside a running writer of its own (`magpie chat`, a separate process
 * holding the data dir): the command, a process too, leaves the erasure to it and prints what it
 * prints without one. The same ids work (the platform message id too), the same ones are refused
 * (nothing matches; reused in several channels), `--json` has one shape whoever applied it, and
 * `--user` prints the `user_erased` audit line either way.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ended, MAGPIE_MAIN, magpieEnv, runMagpie, startChat } from './support/magpie-process.js';
import { openTestDatabase } from './support/storage.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-forget-writer-'));
const dataDir = path.join(root, 'data');
const env = { PATH: process.env.PATH ?? '', HOME: root, USER: 'tester', MAGPIE_DATA_DIR: '' };
const AUTHORS = ['ana', 'bo', 'cy'];

/** What `memory forget ID --json` prints, in this order (docs/json-output.md). */
const ITEM_KEYS = ['forgotten', 'id', 'kind', 'channel_id', 'message_id', 'matched', 'applied_by'];
/** What `memory forget --user ID --json` prints, in this order. */
const USER_KEYS = ['user_erased', 'applied_by', 'channels', 'messages', 'memories_deleted', 'memories_updated', 'summaries_changed', 'tool_entries_redacted'];

const magpie = (args: string[]) => runMagpie(args, { cwd: root, env });
const forget = (...args: string[]) => magpie(['memory', 'forget', ...args, '--data-dir', dataDir]);

/** Every message carries a word of its own (`heron7x`), so its copies can be looked for. */
function transcript(): string {
  const lines: object[] = Array.from({ length: 30 }, (_, index) => ({
    id: `p${index}`,
    channel: 'c1',
    author: AUTHORS[index % 3],
    content: `message ${index}: heron${index}x says the blue widget ships on day ${index}`,
  }));
  // Transcripts may reuse a platform id in another channel: that id alone names neither message.
  lines.push({ id: 'dup', channel: 'c1', author: 'dee', content: 'the twin note kingfisherone is here' });
  lines.push({ id: 'dup', channel: 'c2', author: 'dee', content: 'the twin note kingfishertwo is there' });
  return `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;
}

/** The search results for `word` in `channel`, as JSON text (read beside the writer). */
async function searchText(word: string, channel = 'c1'): Promise<string> {
  const run = await magpie(['memory', 'search', word, '--channel', channel, '--data-dir', dataDir, '--json']);
  assert.equal(run.code, 0, run.stderr);
  return run.stdout;
}

async function storeIdOf(word: string, messageId: string): Promise<string> {
  const results = JSON.parse(await searchText(word)) as Array<{ id: string; message_id?: string }>;
  const hit = results.find((result) => result.message_id === messageId);
  assert.ok(hit, `${messageId} is archived`);
  return hit.id;
}

/** The one JSON object a `--json` run printed, its keys in snake_case. */
function oneObject(stdout: string): Record<string, unknown> {
  const lines = stdout.split('\n').filter((line) => line !== '');
  assert.equal(lines.length, 1, `one line: ${stdout}`);
  const record = JSON.parse(lines[0]!) as Record<string, unknown>;
  for (const key of Object.keys(record)) assert.match(key, /^[a-z][a-z0-9_]*$/, `snake_case key: ${key}`);
  return record;
}

/** The `user_erased` audit line on stderr: a pino line with counts, never the user. */
function auditLine(stderr: string, user: string): Record<string, unknown> {
  const lines = stderr.split('\n').filter((line) => line.includes('"user_erased"'));
  assert.equal(lines.length, 1, `one audit line: ${stderr}`);
  assert.ok(!lines[0]!.includes(`"${user}"`), `the audit line does not name the user: ${lines[0]}`);
  const line = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.equal(line.level, 'info');
  assert.equal(line.event, 'user_erased');
  assert.equal(line.requested_from, 'cli');
  return line;
}

async function assertGarbageRefused(): Promise<void> {
  for (const json of [[], ['--json']]) {
    const ambiguous = await forget('dup', ...json);
    assert.equal(ambiguous.code, 2, ambiguous.stderr);
    assert.equal(ambiguous.stdout, '');
    assert.match(ambiguous.stderr, /message id 'dup' is archived in 2 channels: msg-\d+ in channel c1, msg-\d+ in channel c2/);
    assert.match(ambiguous.stderr, /hint: give the msg-N id of the one to forget/);

    for (const unknown of ['p999', 'msg-99999999', 'mem-1', 'not an id at all']) {
      const run = await forget(unknown, ...json);
      assert.equal(run.code, 1, `${unknown}: ${run.stderr}`);
      assert.equal(run.stdout, '');
      assert.match(run.stderr, new RegExp(`no memory or transcript entry with id '${unknown}'`));
    }
  }
  const blank = await forget('  ');
  assert.equal(blank.code, 2);
  assert.match(blank.stderr, /ID must not be empty[\s\S]*Usage: magpie memory forget ID/);
  const both = await forget('p1', '--user', 'bo', '--json');
  assert.equal(both.code, 2);
  assert.match(both.stderr, /give either ID or --user USER_ID, not both/);
  // Refused, so neither copy of the reused id was touched.
  assert.ok((await searchText('kingfisherone', 'c1')).includes('kingfisherone'));
  assert.ok((await searchText('kingfishertwo', 'c2')).includes('kingfishertwo'));
}

describe('memory forget beside a running magpie chat', { timeout: 240_000 }, () => {
  let chat: ChildProcessWithoutNullStreams | undefined;

  before(async () => {
    writeFileSync(path.join(root, 't.jsonl'), transcript());
    // No metrics endpoint: tests beside this one may hold the default port.
    writeFileSync(path.join(root, 'writer.toml'), '[metrics]\nlisten = ""\n');
    const replay = await magpie(['replay', 't.jsonl', '--data-dir', dataDir]);
    assert.equal(replay.code, 0, replay.stderr);
    chat = await startChat(['--config', 'writer.toml', '--data-dir', dataDir], { cwd: root, env });
  });

  after(async () => {
    if (chat && chat.exitCode === null) {
      chat.stdin.end();
      await ended(chat);
    }
    rmSync(root, { recursive: true, force: true });
  });

  test('a platform message id is applied by the writer and reported as without one', async () => {
    assert.ok((await searchText('heron3x')).includes('heron3x'), 'precondition: archived');
    const run = await forget('p3');
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^forgot msg-\d+: the archived message in channel c1; 'p3' matched the platform message id \(applied by the running bot\)\n$/);
    assert.ok(!(await searchText('heron3x')).includes('heron3x'), 'gone from the archive');

    const again = await forget('p3');
    assert.equal(again.code, 1);
    assert.match(again.stderr, /no memory or transcript entry with id 'p3'/);
  });

  test('--json with an id: one snake_case object saying what was forgotten and who applied it', async () => {
    const storeId = await storeIdOf('heron6x', 'p6');
    const byStoreId = await forget(storeId, '--json');
    assert.equal(byStoreId.code, 0, byStoreId.stderr);
    const record = oneObject(byStoreId.stdout);
    assert.deepEqual(Object.keys(record), ITEM_KEYS);
    assert.deepEqual(record, { forgotten: true, id: storeId, kind: 'transcript', channel_id: 'c1', message_id: 'p6', matched: 'id', applied_by: 'running_bot' });

    const nine = await storeIdOf('heron9x', 'p9');
    const byPlatformId = await forget('p9', '--json');
    assert.equal(byPlatformId.code, 0, byPlatformId.stderr);
    assert.deepEqual(oneObject(byPlatformId.stdout), { forgotten: true, id: nine, kind: 'transcript', channel_id: 'c1', message_id: 'p9', matched: 'message_id', applied_by: 'running_bot' });
    assert.ok(!(await searchText('heron9x')).includes('heron9x'));
  });

  test('an ambiguous id, one that matches nothing, a blank one: refused as without a writer, nothing forgotten', async () => {
    await assertGarbageRefused();
  });

  test('--user --json: the documented snake_case counts, and the user_erased audit line on stderr', async () => {
    const run = await forget('--user', 'bo', '--json');
    assert.equal(run.code, 0, run.stderr);
    const record = oneObject(run.stdout);
    assert.deepEqual(Object.keys(record), USER_KEYS);
    assert.equal(record.user_erased, true);
    assert.equal(record.applied_by, 'running_bot');
    assert.equal(record.channels, 1);
    assert.equal(record.messages, 10);
    const audit = auditLine(run.stderr, 'bo');
    assert.equal(audit.messages, 10);
    assert.equal(audit.channels, 1);
    assert.ok(!(await searchText('heron4x')).includes('heron4x'));

    const text = await forget('--user', 'cy');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^erased 10 message\(s\) in 1 channel\(s\) through the running bot; /);
    assert.equal(auditLine(text.stderr, 'cy').messages, 10);

    const nobody = await forget('--user', 'nobody-here', '--json');
    assert.equal(nobody.code, 0, nobody.stderr);
    assert.equal(oneObject(nobody.stdout).messages, 0);
    assert.match(nobody.stderr, /note: nothing written by user 'nobody-here'/);
  });

  test('with the writer gone the command applies it itself: the same outputs, applied_by command', async () => {
    chat!.stdin.end();
    assert.equal(await ended(chat!), 0);

    const run = await forget('p12', '--json');
    assert.equal(run.code, 0, run.stderr);
    const record = oneObject(run.stdout);
    assert.deepEqual(Object.keys(record), ITEM_KEYS);
    assert.equal(record.matched, 'message_id');
    assert.equal(record.applied_by, 'command');
    const text = await forget('p15');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^forgot msg-\d+: the archived message in channel c1; 'p15' matched the platform message id\n$/);

    const user = await forget('--user', 'ana', '--json');
    assert.equal(user.code, 0, user.stderr);
    const erased = oneObject(user.stdout);
    assert.deepEqual(Object.keys(erased), USER_KEYS);
    assert.equal(erased.applied_by, 'command');
    assert.equal(auditLine(user.stderr, 'ana').messages, erased.messages);

    await assertGarbageRefused();
  });
});

describe('memory forget beside a writer that takes no erasure requests, or one that exits', { timeout: 120_000 }, () => {
  const work = mkdtempSync(path.join(os.tmpdir(), 'magpie-forget-holder-'));
  const holderDir = path.join(work, 'data');
  const workEnv = { ...env, HOME: work };
  const run = (args: string[]) => runMagpie(args, { cwd: work, env: workEnv });
  const forgetHere = (...args: string[]) => run(['memory', 'forget', ...args, '--data-dir', holderDir]);

  /** Requests left in the data dir's table (none may be left behind for a later bot). */
  async function pendingRequests(): Promise<number> {
    const db = await openTestDatabase(holderDir);
    try {
      return Number(((await db.prepare('SELECT COUNT(*) AS total FROM erasure_requests').get()) as { total: number | string }).total);
    } finally {
      await db.close();
    }
  }

  before(async () => {
    writeFileSync(path.join(work, 't.jsonl'), transcript());
    writeFileSync(path.join(work, 'writer.toml'), '[metrics]\nlisten = ""\n');
    const replay = await run(['replay', 't.jsonl', '--data-dir', holderDir]);
    assert.equal(replay.code, 0, replay.stderr);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('beside magpie replay: refused at once naming it, nothing queued; once it is done the command erases', async (t) => {
    // `replay -` holds the data dir for as long as its stdin stays open.
    const args = ['replay', '-', '--data-dir', holderDir];
    const replay = spawn(process.execPath, [MAGPIE_MAIN, ...args], { cwd: work, env: { ...magpieEnv(args, { cwd: work, env: workEnv }), MAGPIE_PROGRESS: '1' } });
    let progress = '';
    replay.stderr.on('data', (chunk: Buffer) => (progress += chunk.toString()));
    const replayEnded = new Promise<number | null>((resolve) => replay.on('close', resolve));
    t.after(() => {
      if (replay.exitCode === null) replay.kill('SIGKILL');
    });
    replay.stdin.write(`${JSON.stringify({ id: 'extra', channel: 'c1', author: 'ann', content: 'one more line' })}\n`);
    const deadline = Date.now() + 20_000;
    while (!progress.includes('replay:') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    assert.ok(progress.includes('replay:'), `replay is under way: ${progress}`);

    const started = performance.now();
    const refused = await forgetHere('p1');
    assert.ok(performance.now() - started < 15_000, 'refused at once, not after the bot wait');
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, new RegExp(`in use by magpie replay \\(pid ${replay.pid}[^)]*\\), which does not apply erasure requests; nothing was erased or queued`));
    assert.match(refused.stderr, /hint: run the command again once magpie replay has finished/);

    replay.stdin.end();
    assert.equal(await replayEnded, 0);
    assert.equal(await pendingRequests(), 0, 'no request left for a later bot');
    const done = await forgetHere('p1', '--json');
    assert.equal(done.code, 0, done.stderr);
    assert.equal(oneObject(done.stdout).applied_by, 'command');
  });

  test('several forgets started at once take turns: every one erases, none is refused or left queued', async () => {
    const ids = ['p11', 'p12', 'p13', 'p14'];
    const runs = await Promise.all(ids.map((id) => forgetHere(id, '--json')));
    for (const [index, result] of runs.entries()) {
      assert.equal(result.code, 0, `${ids[index]}: ${result.stderr}`);
      assert.equal(oneObject(result.stdout).applied_by, 'command');
    }
    assert.equal(await pendingRequests(), 0, 'no request left for a later bot');
    for (const id of ids) {
      const word = `heron${id.slice(1)}x`;
      const search = await run(['memory', 'search', word, '--channel', 'c1', '--data-dir', holderDir, '--json']);
      assert.ok(!search.stdout.includes(word), `${id} is gone`);
    }
  });

  test('a chat that exits before applying the request: the command withdraws it and erases by itself', async (t) => {
    const chat = await startChat(['--config', 'writer.toml', '--data-dir', holderDir], { cwd: work, env: workEnv });
    t.after(() => {
      if (chat.exitCode === null && chat.signalCode === null) chat.kill('SIGKILL');
    });
    const chatEnded = ended(chat);
    // Stopped, the chat cannot apply the request; killed, it leaves the data dir to the command.
    chat.kill('SIGSTOP');
    const forgot = forgetHere('p2', '--json');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    chat.kill('SIGKILL');
    await chatEnded;
    const outcome = await forgot;
    assert.equal(outcome.code, 0, outcome.stderr);
    assert.deepEqual(oneObject(outcome.stdout), { forgotten: true, id: oneObject(outcome.stdout).id, kind: 'transcript', channel_id: 'c1', message_id: 'p2', matched: 'message_id', applied_by: 'command' });
    assert.equal(await pendingRequests(), 0, 'the withdrawn request is not left for a later bot');
  });
});
