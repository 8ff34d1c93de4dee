import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { startFakeDiscord } from './fakes/fake-discord.js';
import { waitUntil } from './discord-helpers.js';
import { startMagpie } from './support/magpie-process.js';

const ALICE = '100000000000000001';
const GENERAL = '700000000000000001';

function start(args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }) {
  return startMagpie(['start', ...args], { cwd: options.cwd, env: { PATH: process.env.PATH, HOME: options.cwd, ...options.env } });
}

test('magpie start without a token explains what to set and suggests magpie chat', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-start-'));
  try {
    const run = start([], { cwd: dir });
    const code = await run.exited;
    assert.equal(code, 3);
    assert.match(run.output.stderr, /DISCORD_TOKEN is not set/);
    assert.match(run.output.stderr, /discord\.com\/developers\/applications/);
    assert.match(run.output.stderr, /magpie chat/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie start refuses a configured model it cannot use', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-start-'));
  try {
    writeFileSync(path.join(dir, 'config.toml'), `[llm]\nmodel = "claude-test"\n\n[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`);
    const run = start([], { cwd: dir, env: { DISCORD_TOKEN: 'token' } });
    assert.equal(await run.exited, 3);
    assert.match(run.output.stderr, /ANTHROPIC_API_KEY/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie start answers on Discord and SIGTERM lets the running reply finish', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-start-'));
  const discord = await startFakeDiscord({
    users: [{ id: ALICE, username: 'alice' }],
    channels: [{ id: GENERAL, name: 'general', type: 0 }],
  });
  const model = await startFakeAnthropic();
  try {
    model.setDefault({ delayMs: 300, then: { text: 'a considered answer' } });
    const configFile = path.join(dir, 'magpie.toml');
    writeFileSync(
      configFile,
      [
        '[llm]',
        'model = "claude-test"',
        `base_url = "${model.baseUrl}"`,
        'max_retries = 0',
        '[memory]',
        `data_dir = "${path.join(dir, 'data')}"`,
        '[discord]',
        'debounce_ms = 10',
        'debounce_max_ms = 100',
        'shutdown_grace_ms = 5000',
        '[logging]',
        'level = "info"',
        '',
      ].join('\n'),
    );
    const run = start(['--config', configFile], {
      cwd: dir,
      env: { DISCORD_TOKEN: 'test-token', MAGPIE_DISCORD_API: discord.restApi },
    });
    await discord.waitForReady(15_000);
    await waitUntil(() => run.output.stdout.includes('magpie is running'), 'bot running', 15_000);
    const id = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'think hard', mentionsBot: true });
    await waitUntil(() => model.inFlight > 0, 'model call in flight', 10_000);
    run.child.kill('SIGTERM');
    const posted = await discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 10_000 });
    assert.equal(posted.content, 'a considered answer');
    assert.equal(await run.exited, 0, run.output.stderr);
    assert.match(run.output.stdout, /"event":"stopped"/);
    const shutdownLog = run.output.stdout.slice(run.output.stdout.indexOf('"event":"stopping"'));
    assert.doesNotMatch(shutdownLog, /discord_reconnecting/, 'a clean shutdown is not logged as a reconnect');
    assert.doesNotMatch(run.output.stdout, /think hard/, 'message content is not logged');
  } finally {
    await model.close();
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('SIGTERM while the gateway connection is still pending stops magpie start cleanly', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-start-'));
  // The gateway accepts TCP but never completes the WebSocket handshake, and drops the socket
  // after a while: discord.js sits in "connecting" and would retry for ever.
  const pending = new Set<Socket>();
  const gateway = createNetServer((socket) => {
    pending.add(socket);
    socket.on('error', () => {});
    setTimeout(() => socket.destroy(), 1_000).unref();
  });
  await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
  const gatewayPort = (gateway.address() as AddressInfo).port;
  const rest = createServer((request, response) => {
    if (request.url?.endsWith('/gateway/bot')) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          url: `ws://127.0.0.1:${gatewayPort}`,
          shards: 1,
          session_start_limit: { total: 1000, remaining: 999, reset_after: 0, max_concurrency: 1 },
        }),
      );
      return;
    }
    response.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"no route","code":0}');
  });
  await new Promise<void>((resolve) => rest.listen(0, '127.0.0.1', resolve));
  try {
    writeFileSync(path.join(dir, 'config.toml'), `[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`);
    const restPort = (rest.address() as AddressInfo).port;
    const run = start([], { cwd: dir, env: { DISCORD_TOKEN: 'test-token', MAGPIE_DISCORD_API: `http://127.0.0.1:${restPort}/api` } });
    await waitUntil(() => pending.size > 0, 'the bot connecting to the gateway', 15_000);
    run.child.kill('SIGTERM');
    const code = await Promise.race([run.exited, new Promise<'hung'>((resolve) => setTimeout(resolve, 15_000, 'hung').unref())]);
    if (code === 'hung') run.child.kill('SIGKILL');
    assert.equal(code, 0, `exit after SIGTERM; stderr: ${run.output.stderr}`);
    assert.match(run.output.stdout, /"event":"stopped"/);
    assert.doesNotMatch(run.output.stderr, /Unhandled|Error/);
  } finally {
    rest.close();
    for (const socket of pending) socket.destroy();
    gateway.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
