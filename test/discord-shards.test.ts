/**
 * Sharding: `magpie start --shards 2` runs discord.js's ShardingManager, one process per shard,
 * against the fake Discord, which routes each guild's events to shard (guild_id >> 22) % 2 and
 * DMs to shard 0. Each shard answers its own guilds and writes its own data dir; `magpie memory`
 * reads across them.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { dataDirOfChannel, listDataDirs, shardDataDir } from '../src/storage/shard-dirs.js';
import { waitUntil } from './discord-helpers.js';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { FAKE_GUILD_ID, startFakeDiscord } from './fakes/fake-discord.js';
import { runMagpie, startMagpie } from './support/magpie-process.js';
import { storageEnv, TEST_STORAGE } from './support/storage.js';

const ALICE = '100000000000000001';
/** (id >> 22) % 2 === 0 */
const GUILD_ZERO = '800000000004194304';
const CHANNEL_ZERO = '700000000000000010';
/** In the default guild, whose shard is 1. */
const CHANNEL_ONE = '700000000000000011';
const DM = '710000000000000010';

/** A free port whose next port is free too (one listener per shard), released for the test to use. */
async function twoFreePorts(): Promise<number> {
  const listen = (port: number) =>
    new Promise<Server | undefined>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(undefined));
      server.listen(port, '127.0.0.1', () => resolve(server));
    });
  const close = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const first = (await listen(0))!;
    const port = (first.address() as { port: number }).port;
    const second = port < 65_535 ? await listen(port + 1) : undefined;
    await close(first);
    if (second) {
      await close(second);
      return port;
    }
  }
  throw new Error('no two consecutive free ports');
}

test('two shard processes each answer their own guilds, DMs go to shard 0, data dirs are per shard', { timeout: 180_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-shards-'));
  const discord = await startFakeDiscord({
    shards: 2,
    guilds: [{ id: GUILD_ZERO, name: 'Guild Zero' }],
    users: [{ id: ALICE, username: 'alice' }],
    channels: [
      { id: CHANNEL_ZERO, name: 'zero', type: 0, guildId: GUILD_ZERO },
      { id: CHANNEL_ONE, name: 'one', type: 0 },
      { id: DM, name: 'dm', type: 1 },
    ],
  });
  assert.equal(discord.shardOfGuild(GUILD_ZERO), 0);
  assert.equal(discord.shardOfGuild(FAKE_GUILD_ID), 1);
  const model = await startFakeAnthropic();
  model.setDefault({ text: 'answered' });
  const dataDir = path.join(dir, 'data');
  const metricsPort = await twoFreePorts();
  const configFile = path.join(dir, 'magpie.toml');
  writeFileSync(
    configFile,
    [
      '[llm]',
      'model = "claude-test"',
      `base_url = "${model.baseUrl}"`,
      'max_retries = 0',
      '[memory]',
      `data_dir = "${dataDir}"`,
      '[discord]',
      'debounce_ms = 10',
      'debounce_max_ms = 100',
      'register_commands = false',
      `dm_users = ["${ALICE}"]`,
      '[metrics]',
      `listen = "127.0.0.1:${metricsPort}"`,
      '',
    ].join('\n'),
  );
  // On PostgreSQL both shards and the CLI share the schema of the deployment's data dir.
  const storage = storageEnv(dataDir);
  const { child, output, exited } = startMagpie(['start', '--config', configFile, '--shards', '2'], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: dir, DISCORD_TOKEN: 'test-token', MAGPIE_DISCORD_API: discord.restApi, ...storage },
  });
  try {
    await waitUntil(() => output.stdout.includes('"event":"shards_started"'), `both shards running: ${output.stderr}`, 120_000);
    assert.deepEqual(
      discord.identifiedShards.map((shard) => shard.join('/')).sort(),
      ['0/2', '1/2'],
      'each process identified as its own shard of two',
    );
    // Each shard process serves its metrics and health checks on a port of its own: port + shard id.
    for (const port of [metricsPort, metricsPort + 1]) {
      await waitUntil(() => output.stdout.includes(`"address":"127.0.0.1:${port}"`), `a shard listening on ${port}: ${output.stdout}`, 60_000);
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.equal(health.status, 200);
      assert.match(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), /^magpie_/m);
    }
    assert.doesNotMatch(output.stdout, /metrics_listen_failed/);
    const inZero = discord.sendMessage({ channelId: CHANNEL_ZERO, authorId: ALICE, content: 'hello shard zero', mentionsBot: true });
    const inOne = discord.sendMessage({ channelId: CHANNEL_ONE, authorId: ALICE, content: 'hello shard one', mentionsBot: true });
    const inDm = discord.sendMessage({ channelId: DM, authorId: ALICE, content: 'hello in private' });
    for (const id of [inZero, inOne, inDm]) {
      await discord.waitForPost((message) => message.messageReference?.message_id === id, { timeoutMs: 60_000 });
    }
    child.kill('SIGTERM');
    assert.equal(await exited, 0, output.stderr);

    if (TEST_STORAGE === 'sqlite') {
      assert.deepEqual(
        listDataDirs(dataDir).map((entry) => entry.shardId),
        [0, 1],
      );
      assert.equal(dataDirOfChannel(dataDir, CHANNEL_ZERO)?.dir, shardDataDir(dataDir, 0), 'guild zero lives in shard 0');
      assert.equal(dataDirOfChannel(dataDir, CHANNEL_ONE)?.dir, shardDataDir(dataDir, 1), 'the default guild lives in shard 1');
      assert.equal(dataDirOfChannel(dataDir, DM)?.dir, shardDataDir(dataDir, 0), 'DMs live in shard 0');
    }

    // `magpie memory` pointed at the deployment's data dir finds each channel in its shard.
    for (const [channel, words] of [
      [CHANNEL_ZERO, 'shard zero'],
      [CHANNEL_ONE, 'shard one'],
    ] as const) {
      const run = await runMagpie(['memory', 'search', words, '--channel', channel, '--data-dir', dataDir, '--json'], {
        cwd: dir,
        env: { PATH: process.env.PATH, HOME: dir, ...storage },
      });
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, new RegExp(`hello ${words}`));
    }
    const stats = await runMagpie(['memory', 'stats', '--data-dir', dataDir, '--json'], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, ...storage } });
    assert.equal(stats.code, 0, stats.stderr);
    assert.ok(JSON.parse(stats.stdout).transcript_entries >= 6, 'stats add up both shards (3 messages, 3 replies)');
    if (TEST_STORAGE === 'sqlite') {
      // A shard's data dir is written by its running shard: forget names the one it would need.
      const forget = await runMagpie(['memory', 'forget', 'msg-1', '--data-dir', dataDir], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } });
      assert.notEqual(forget.code, 0);
      assert.match(forget.stderr, /shard-0/);
    }
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    await model.close();
    await discord.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bad --shards and --shard-ids are refused with a message naming the flag', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-shards-'));
  try {
    const env = { PATH: process.env.PATH, HOME: dir, DISCORD_TOKEN: 'test-token' };
    for (const [args, pattern] of [
      [['--shards', '0'], /--shards must be "auto" or a whole number/],
      [['--shards', 'many'], /--shards must be "auto" or a whole number/],
      [['--shard-ids', '1'], /--shard-ids needs --shards/],
      [['--shards', '2', '--shard-ids', '2'], /shard 2 does not exist with 2 shards/],
      [['--shards', '2', '--shard-ids', '1,1'], /names shard 1 twice/],
      [['--shards', '2', '--shard-ids', 'one'], /--shard-ids must be shard numbers/],
    ] as const) {
      const run = await runMagpie(['start', ...args], { cwd: dir, env });
      assert.notEqual(run.code, 0, args.join(' '));
      assert.match(run.stderr, pattern, `${args.join(' ')}: ${run.stderr}`);
    }
    // The last shard's metrics port must exist: refused before any shard starts.
    const configFile = path.join(dir, 'high-port.toml');
    writeFileSync(configFile, '[metrics]\nlisten = "127.0.0.1:65535"\n');
    const highPort = await runMagpie(['start', '--config', configFile, '--shards', '3'], { cwd: dir, env });
    assert.equal(highPort.code, 3, highPort.stderr);
    assert.match(highPort.stderr, /shard 2 would serve metrics on port 65537/);
    assert.match(highPort.stderr, /at most 65533/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
