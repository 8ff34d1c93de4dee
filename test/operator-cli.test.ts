import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { waitUntil } from './discord-helpers.js';
import { MAGPIE_MAIN } from './support/magpie-process.js';
import { parseMetrics, sampleValue } from './support/prometheus-text.js';

function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'magpie-operator-'));
}

/** `magpie chat` with stdin kept open, so a test can type, edit files and read along. */
function chat(args: string[], dir: string) {
  const child = spawn(process.execPath, [MAGPIE_MAIN, 'chat', ...args], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, USER: 'tester' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output = { stdout: '', stderr: '' };
  child.stdout.on('data', (chunk) => (output.stdout += chunk));
  child.stderr.on('data', (chunk) => (output.stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  return { child, output, exited };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
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
