import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { waitUntil } from './discord-helpers.js';
import { MAGPIE_MAIN, magpieEnv, runMagpie } from './support/magpie-process.js';
import { parseMetrics, sampleValue } from './support/prometheus-text.js';
import { freePort } from './support/free-port.js';

function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'magpie-operator-'));
}

/** `magpie chat` with stdin kept open, so a test can type, edit files and read along. */
function chat(args: string[], dir: string) {
  const child = spawn(process.execPath, [MAGPIE_MAIN, 'chat', ...args], {
    cwd: dir,
    env: magpieEnv(args, { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, USER: 'tester' } }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk) => (output.stdout += chunk));
  child.stderr.on('data', (chunk) => (output.stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, output, exited };
}

test('magpie chat follows edits of its config file: a new window applies at once, a bad edit is refused', async () => {
  const dir = tempDir();
  const configFile = path.join(dir, 'config.toml');
  const data = path.join(dir, 'data');
  const write = (window: string) => writeFileSync(configFile, `[defaults]\ncontext_window = ${window}\n[memory]\ndata_dir = "${data}"\n[metrics]\nlisten = ""\n`);
  write('50000');
  const run = chat(['--config', configFile], dir);
  try {
    run.child.stdin.write('hello there\n/context\n');
    await waitUntil(() => run.output.stdout.includes('of 50,000 tokens'), 'the first /context', 20_000);

    write('8000');
    await waitUntil(() => run.output.stderr.includes('config reloaded'), 'the reload notice', 20_000);
    assert.match(run.output.stderr, /defaults\.context_window: 50000 → 8000/);
    run.child.stdin.write('/context\n');
    await waitUntil(() => run.output.stdout.includes('of 8,000 tokens'), 'the window after the edit', 20_000);

    write('"big"');
    await waitUntil(() => run.output.stderr.includes('config change refused'), 'the refusal notice', 20_000);
    assert.match(run.output.stderr, /defaults\.context_window: must be a whole number/);
    run.child.stdin.write('/context\n');
    await waitUntil(() => run.output.stdout.split('of 8,000 tokens').length === 3, 'the running window kept', 20_000);

    run.child.stdin.end('/quit\n');
    assert.equal(await run.exited, 0, run.output.stderr);
  } finally {
    run.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie chat serves metrics and readiness; a taken port is a notice, not a failure', async () => {
  const dir = tempDir();
  const port = await freePort();
  const configFile = path.join(dir, 'config.toml');
  writeFileSync(configFile, `[memory]\ndata_dir = "${path.join(dir, 'data')}"\n[metrics]\nlisten = "127.0.0.1:${port}"\n`);
  const run = chat(['--config', configFile], dir);
  try {
    run.child.stdin.write('one\ntwo\n/context\n');
    await waitUntil(() => run.output.stdout.includes('Live messages: 2'), 'two messages in', 20_000);
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const metrics = parseMetrics(await (await fetch(`${base}/metrics`)).text());
    assert.equal(sampleValue(metrics, 'magpie_messages_ingested_total'), 2);
    assert.equal(sampleValue(metrics, 'magpie_channels_loaded'), 1);
    assert.equal((await fetch(`${base}/metrics`, { method: 'POST' })).status, 405);

    // A second chat on the same port still chats, and says why it has no metrics.
    const second = chat(['--config', configFile, '--data-dir', path.join(dir, 'other')], dir);
    second.child.stdin.end('hi\n/quit\n');
    assert.equal(await second.exited, 0, second.output.stderr);
    assert.match(second.output.stderr, new RegExp(`metrics are off: cannot serve metrics on 127\\.0\\.0\\.1:${port}: EADDRINUSE`));
    assert.match(second.output.stderr, /set \[metrics\] listen to a free "host:port", or "" to turn metrics off/);

    run.child.stdin.end('/quit\n');
    assert.equal(await run.exited, 0, run.output.stderr);
    await assert.rejects(fetch(`${base}/healthz`), 'the listener is closed with the chat');
  } finally {
    run.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('unknown flags get a "did you mean", at the top level and in commands', async () => {
  const dir = tempDir();
  try {
    const replay = await runMagpie(['replay', 'x.jsonl', '--dta-dir', 'd'], { cwd: dir, env: { PATH: process.env.PATH } });
    assert.equal(replay.code, 2);
    assert.match(replay.stderr, /unknown option '--dta-dir'; did you mean '--data-dir'\?/);
    const memory = await runMagpie(['memory', 'search', 'q', '--chanel', 'c'], { cwd: dir, env: { PATH: process.env.PATH } });
    assert.equal(memory.code, 2);
    assert.match(memory.stderr, /unknown option '--chanel'; did you mean '--channel'\?/);
    const top = await runMagpie(['--verison'], { cwd: dir, env: { PATH: process.env.PATH } });
    assert.equal(top.code, 2);
    assert.match(top.stderr, /unknown option '--verison' \(did you mean '--version'\?\)/);
    const far = await runMagpie(['chat', '--xyzzy'], { cwd: dir, env: { PATH: process.env.PATH } });
    assert.equal(far.code, 2);
    assert.match(far.stderr, /unknown option '--xyzzy'/);
    assert.doesNotMatch(far.stderr, /did you mean/, 'no guess when nothing is close');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('memory search for a channel with no data names the channel it probably meant', async () => {
  const dir = tempDir();
  const data = path.join(dir, 'data');
  const env = { PATH: process.env.PATH, HOME: dir, USER: 'tester' };
  try {
    const chatted = await runMagpie(['chat', '--data-dir', data], { cwd: dir, env, input: 'the deploy window is friday\n' });
    assert.equal(chatted.code, 0, chatted.stderr);
    const search = await runMagpie(['memory', 'search', 'deploy', '--channel', 'local', '--data-dir', data], { cwd: dir, env });
    assert.equal(search.code, 0, search.stderr);
    assert.match(search.stdout, /no results/);
    assert.match(search.stderr, /nothing is stored for channel 'local'; did you mean 'console:local'\?; channels with data: console:local/);
    const found = await runMagpie(['memory', 'search', 'deploy', '--channel', 'console:local', '--data-dir', data], { cwd: dir, env });
    assert.match(found.stdout, /deploy window is friday/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('transcript lines without ts get times in file order, after what the channel already has', async () => {
  const dir = tempDir();
  const data = path.join(dir, 'data');
  const env = { PATH: process.env.PATH };
  const line = (id: string, content: string, ts?: string) => JSON.stringify({ id, channel: 'c1', author: 'ana', content, ...(ts ? { ts } : {}) });
  const times = async (): Promise<Map<string, number>> => {
    const listed = await runMagpie(['memory', 'list', '--data-dir', data, '--channel', 'c1', '--kind', 'transcript', '--json'], { cwd: dir, env });
    assert.equal(listed.code, 0, listed.stderr);
    const records = listed.stdout.trim().split('\n').map((text) => JSON.parse(text) as { content: string; created_at: string });
    return new Map(records.map((record) => [record.content.replace(/^ana: /, ''), Date.parse(record.created_at)]));
  };
  try {
    const startedAt = Date.now();
    writeFileSync(path.join(dir, 'a.jsonl'), [line('1', 'first'), line('2', 'second'), line('3', 'third')].join('\n'));
    assert.equal((await runMagpie(['replay', 'a.jsonl', '--data-dir', data], { cwd: dir, env })).code, 0);
    const first = await times();
    assert.ok(first.get('first')! >= startedAt - 1000, `no fixed date in 2020: ${new Date(first.get('first')!).toISOString()}`);
    assert.ok(first.get('first')! < first.get('second')! && first.get('second')! < first.get('third')!, 'in file order');

    // A later transcript of the same channel continues after its newest stored message, even
    // when that message carries a time in the future.
    const future = '2099-01-01T00:00:00.000Z';
    writeFileSync(path.join(dir, 'b.jsonl'), [line('4', 'dated', future), line('5', 'after the dated one')].join('\n'));
    assert.equal((await runMagpie(['replay', 'b.jsonl', '--data-dir', data], { cwd: dir, env })).code, 0);
    writeFileSync(path.join(dir, 'c.jsonl'), [line('6', 'later still')].join('\n'));
    assert.equal((await runMagpie(['replay', 'c.jsonl', '--data-dir', data], { cwd: dir, env })).code, 0);
    const second = await times();
    assert.equal(second.get('dated'), Date.parse(future));
    assert.ok(second.get('after the dated one')! > Date.parse(future));
    assert.ok(second.get('later still')! > second.get('after the dated one')!);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
