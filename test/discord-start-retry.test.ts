import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { startFakeDiscord } from './fakes/fake-discord.js';
import { startFakeEmbeddingsServer } from './fakes/fake-embeddings-server.js';
import { waitUntil } from './discord-helpers.js';
import { runMagpie, startMagpie, type MagpieChild } from './support/magpie-process.js';
import { backoffDelayMs } from '../src/discord/connect-retry.js';
import { freePort } from './support/free-port.js';

const ALICE = '100000000000000001';
const GENERAL = '700000000000000001';

function writeConfig(dir: string, lines: string[]): string {
  const file = path.join(dir, 'magpie.toml');
  writeFileSync(file, [`[memory]`, `data_dir = "${path.join(dir, 'data')}"`, ...lines, ''].join('\n'));
  return file;
}

function start(configFile: string, dir: string, discordPort: number): MagpieChild {
  return startMagpie(['start', '--config', configFile], {
    cwd: dir,
    // The data dir the config names, also in the environment: on a PostgreSQL run it picks the schema.
    env: { PATH: process.env.PATH, HOME: dir, DISCORD_TOKEN: 'test-token', MAGPIE_DISCORD_API: `http://127.0.0.1:${discordPort}/api`, MAGPIE_DATA_DIR: path.join(dir, 'data') },
  });
}

async function stopped(run: MagpieChild): Promise<number | null> {
  const code = await Promise.race([run.exited, new Promise<'hung'>((resolve) => setTimeout(resolve, 20_000, 'hung').unref())]);
  if (code === 'hung') {
    run.child.kill('SIGKILL');
    assert.fail(`magpie start did not exit; stderr: ${run.output.stderr}`);
  }
  return code;
}

function logLines(run: MagpieChild, event: string): Array<Record<string, unknown>> {
  return run.output.stdout
    .split('\n')
    .filter((line) => line.includes(`"event":"${event}"`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

test('magpie start waits out a Discord that is not up yet: /healthz answers, /readyz says why, then it connects and answers', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-retry-'));
  const discordPort = await freePort();
  const metricsPort = await freePort();
  const model = await startFakeAnthropic();
  model.setDefault({ text: 'here now' });
  const configFile = writeConfig(dir, [
    '[llm]',
    'model = "claude-test"',
    `base_url = "${model.baseUrl}"`,
    'max_retries = 0',
    '[discord]',
    'debounce_ms = 10',
    'debounce_max_ms = 100',
    '[metrics]',
    `listen = "127.0.0.1:${metricsPort}"`,
  ]);
  const run = start(configFile, dir, discordPort);
  let discord: Awaited<ReturnType<typeof startFakeDiscord>> | undefined;
  try {
    await waitUntil(() => logLines(run, 'discord_connect_retry').length >= 1, 'a logged retry', 20_000);
    const retry = logLines(run, 'discord_connect_retry')[0]!;
    assert.equal(retry.attempt, 1);
    assert.equal(typeof retry.retry_in_ms, 'number');
    assert.match(String(retry.error), /ECONNREFUSED|fetch failed/);
    assert.equal(retry.level, 'warn');
    const health = await fetch(`http://127.0.0.1:${metricsPort}/healthz`);
    assert.equal(health.status, 200);
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    assert.equal(ready.status, 503);
    assert.match(await ready.text(), /discord unreachable \(attempt \d+: .+\); next attempt in \d+ s/);
    assert.equal(run.child.exitCode, null, 'still running while Discord is away');

    discord = await startFakeDiscord({
      port: discordPort,
      users: [{ id: ALICE, username: 'alice' }],
      channels: [{ id: GENERAL, name: 'general', type: 0 }],
    });
    await discord.waitForReady(70_000);
    await waitUntil(() => run.output.stdout.includes('magpie is running'), 'bot running', 15_000);
    await waitUntil(async () => (await fetch(`http://127.0.0.1:${metricsPort}/readyz`)).status === 200, '/readyz turning 200', 15_000);
    const id = discord.sendMessage({ channelId: GENERAL, authorId: ALICE, content: 'are you there?', mentionsBot: true });
    const posted = await discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 15_000 });
    assert.equal(posted.content, 'here now');
    run.child.kill('SIGTERM');
    assert.equal(await stopped(run), 0, run.output.stderr);
  } finally {
    if (run.child.exitCode === null) run.child.kill('SIGKILL');
    await discord?.close();
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('SIGTERM while magpie start waits between attempts stops it at once', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-retry-'));
  let run: MagpieChild | undefined;
  try {
    const configFile = writeConfig(dir, ['[metrics]', 'listen = ""']);
    run = start(configFile, dir, await freePort());
    const started = run;
    await waitUntil(() => logLines(started, 'discord_connect_retry').length >= 1, 'a logged retry', 20_000);
    run.child.kill('SIGTERM');
    assert.equal(await stopped(run), 0, run.output.stderr);
    assert.match(run.output.stdout, /"event":"stopped"/);
  } finally {
    // A failed wait must not leave the bot running: the test file would never end.
    if (run && run.child.exitCode === null) run.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a token Discord rejects (401) stops magpie start with what to fix, without retrying', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-retry-'));
  const discord = await startFakeDiscord({ rejectToken: true });
  try {
    const configFile = writeConfig(dir, ['[metrics]', 'listen = ""']);
    const run = start(configFile, dir, Number(new URL(discord.restApi).port));
    assert.equal(await stopped(run), 3);
    assert.match(run.output.stderr, /Discord rejected the bot token in DISCORD_TOKEN \(401 Unauthorized\)/);
    assert.match(run.output.stderr, /hint: .*Reset Token/);
    assert.equal(logLines(run, 'discord_connect_retry').length, 0);
    assert.doesNotMatch(run.output.stdout + run.output.stderr, /test-token/, 'the token is never printed');
  } finally {
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('intents Discord disallows (4014) stop magpie start and name the Message Content switch', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-retry-'));
  const discord = await startFakeDiscord({ disallowIntents: true });
  try {
    const configFile = writeConfig(dir, ['[metrics]', 'listen = ""']);
    const run = start(configFile, dir, Number(new URL(discord.restApi).port));
    assert.equal(await stopped(run), 3);
    assert.match(run.output.stderr, /Discord refused the connection: Used disallowed intents/);
    assert.match(run.output.stderr, /Message Content intent/);
  } finally {
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an embedder that is not up yet is waited out at start (stored text re-embedded once it answers)', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-retry-'));
  const embedderPort = await freePort();
  const metricsPort = await freePort();
  const discord = await startFakeDiscord({ channels: [{ id: GENERAL, name: 'general', type: 0 }] });
  let embeddings: Awaited<ReturnType<typeof startFakeEmbeddingsServer>> | undefined;
  let run: MagpieChild | undefined;
  try {
    // Text stored with the built-in embedder: switching to the HTTP one re-embeds it at start.
    const transcript = path.join(dir, 'talk.jsonl');
    writeFileSync(transcript, `${JSON.stringify({ id: 'm1', channel: GENERAL, author: 'alice', content: 'the deploy is on friday' })}\n`);
    const seeded = await runMagpie(['replay', transcript, '--data-dir', path.join(dir, 'data')], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } });
    assert.equal(seeded.code, 0, seeded.stderr);
    const configFile = writeConfig(dir, [
      'embedder = "http"',
      '[memory.http]',
      `url = "http://127.0.0.1:${embedderPort}/v1/embeddings"`,
      'dimension = 8',
      'max_retries = 0',
      '[metrics]',
      `listen = "127.0.0.1:${metricsPort}"`,
    ]);
    run = start(configFile, dir, Number(new URL(discord.restApi).port));
    const started = run;
    await waitUntil(() => logLines(started, 'open_retry').length >= 1, 'a logged retry of the memory store', 20_000);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status, 200);
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    assert.equal(ready.status, 503);
    assert.match(await ready.text(), /memory not open yet \(attempt \d+: embeddings request to .+ failed/);
    embeddings = await startFakeEmbeddingsServer({ port: embedderPort });
    embeddings.setDefault({ kind: 'vectors', dimension: 8 });
    await waitUntil(() => started.output.stdout.includes('magpie is running'), 'bot running', 70_000);
    assert.ok(embeddings.requests.length >= 1, 'the stored text was re-embedded');
    run.child.kill('SIGTERM');
    assert.equal(await stopped(run), 0, run.output.stderr);
  } finally {
    if (run && run.child.exitCode === null) run.child.kill('SIGKILL');
    await embeddings?.close();
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('waits between attempts double up to a minute, half fixed and half random', () => {
  assert.equal(backoffDelayMs(1, { random: () => 0 }), 500);
  assert.equal(backoffDelayMs(1, { random: () => 0.999999 }), 1_000);
  assert.equal(backoffDelayMs(4, { random: () => 0 }), 4_000);
  assert.equal(backoffDelayMs(50, { random: () => 0 }), 30_000);
  assert.equal(backoffDelayMs(50, { random: () => 0.999999 }), 60_000);
});
