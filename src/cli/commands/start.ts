import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MODEL_HINT, openApp, type MagpieApp } from '../../app/index.js';
import { errorMessage, MagpieError } from '../../common/errors.js';
import { EventStream } from '../../common/events.js';
import { loadConfig, watchConfigFile, type ConfigWatcher } from '../../config/index.js';
import { connectionProblem, createDiscordClient, destroyClient, DiscordAdapter } from '../../discord/index.js';
import { connectRefusal, retryUntilConnected } from '../../discord/connect-retry.js';
import {
  currentShard,
  MAX_SHARDS,
  parseShardCount,
  parseShardIds,
  recommendedShardCount,
  ShardRunner,
  type ShardCount,
} from '../../discord/sharding.js';
import { shardDataDir } from '../../storage/shard-dirs.js';
import { checkStorageEnvironment } from '../../storage/open-storage.js';
import { attachEventLogger, createLogger, followConfigLevel } from '../../logging/index.js';
import { CatchUpPoints } from '../../channel/catch-up-points.js';
import { announceOperatorEndpoint, databaseProblem, openOperatorEndpoint, shardListen, storageState } from '../../metrics/index.js';
import { DISCORD_API_ENV, EXIT, type CliCommand, type CliIo } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { parseFlags, UsageError } from '../parse-flags.js';
import type { Logger } from 'pino';
import type { Client } from 'discord.js';

const USAGE = `Usage: magpie start [--config FILE] [--shards auto|N [--shard-ids LIST]]

Runs the Discord bot: connects to Discord, records every message in the channels it may
read, answers according to each channel's reply policy, and compacts history in the
background. Stop it with Ctrl-C or SIGTERM; running replies get [discord] shutdown_grace_ms
to finish. While Discord (or the HTTP embedder) cannot be reached, start keeps trying with
growing, jittered waits (up to a minute) for as long as it runs; a token or intents Discord
refuses end it with exit code 3.

Options:
  --config FILE     configuration file (default: ./config.toml if present, else built-in defaults)
  --shards auto|N   run N shards (auto: as many as Discord recommends), one process each, through
                    discord.js's ShardingManager; each shard answers its own guilds (DMs: shard 0)
                    and keeps its data in <data_dir>/shard-<id>
  --shard-ids LIST  only these shards on this machine, e.g. 0,1 (the others run elsewhere)
  -h, --help        show this help

Metrics (/metrics), liveness (/healthz) and readiness (/readyz) are served on [metrics] listen
(default 127.0.0.1:9464; "" turns them off). With --shards, shard K serves them on that port + K
(shard 0 on 9464, shard 1 on 9465, ...; port 0: each shard picks a free port); the manager
process serves none.

Environment:
  DISCORD_TOKEN      the bot token (the name is set by [discord] token_env)
  ANTHROPIC_API_KEY  the model key (the name is set by [llm] api_key_env)
  LOG_LEVEL          overrides [logging] level
  MAGPIE_DATA_DIR    overrides [memory] data_dir (where magpie.sqlite lives)
  MAGPIE_DISCORD_API another Discord REST base URL, e.g. a proxy (default: Discord's own)
`;

export function missingTokenMessage(variable: string): string {
  return [
    `magpie start: no Discord bot token: the environment variable ${variable} is not set.`,
    '',
    'To get a token:',
    '  1. Open https://discord.com/developers/applications and create an application (New Application).',
    '  2. Under Bot, press Reset Token and copy it; on the same page enable the Message Content intent.',
    '  3. Invite the bot to your server (OAuth2 → URL Generator, scopes "bot" and "applications.commands").',
    `  4. Run:  ${variable}=<token> npx magpie start`,
    '',
    'To try Magpie without Discord, chat with it in the terminal:  npx magpie chat',
    '',
  ].join('\n');
}

export const startCommand: CliCommand = {
  name: 'start',
  summary: COMMAND_SUMMARIES.start,
  async run(argv: string[], io: CliIo): Promise<number> {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: { config: { type: 'string' }, shards: { type: 'string' }, 'shard-ids': { type: 'string' } },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const shardsFlag = parsed.values.shards;
    const shardIdsFlag = parsed.values['shard-ids'];
    if (shardIdsFlag !== undefined && shardsFlag === undefined) throw new UsageError('--shard-ids needs --shards', USAGE);
    const shardCount = shardsFlag === undefined ? undefined : usage(() => parseShardCount(shardsFlag));
    // Usage errors come before the config and the token: the ids' form is checked here, and
    // against the shard count once it is known (with `auto`, only after asking Discord).
    if (shardIdsFlag !== undefined) usage(() => parseShardIds(shardIdsFlag, shardCount === 'auto' || shardCount === undefined ? MAX_SHARDS : shardCount));
    const shard = currentShard(io.env);
    const loaded = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env });
    const config = loaded.config;
    const token = io.env[config.discord.tokenEnv]?.trim() ?? '';
    if (token === '') {
      io.stderr.write(missingTokenMessage(config.discord.tokenEnv));
      return EXIT.config;
    }
    // PostgreSQL without its URL is refused like the token, before the endpoint or any shard starts.
    checkStorageEnvironment(config, io.env);

    const logger = createLogger({
      level: config.logging.level,
      env: io.env,
      destination: io.stdout,
      // The variables the config names hold secrets whatever they are called.
      secretEnv: [config.discord.tokenEnv, config.llm.apiKeyEnv, config.memory.http.apiKeyEnv, config.storage.urlEnv],
    });
    const events = new EventStream();
    attachEventLogger(events, logger);
    if (shardCount !== undefined && !shard) {
      return runShards({
        count: shardCount,
        idsFlag: shardIdsFlag,
        configPath: loaded.found ? loaded.path : undefined,
        metricsListen: config.metrics.listen,
        token,
        io,
        events,
        logger,
      });
    }
    // A shard keeps its own data dir: its channels are its own, and SQLite has one writer.
    const dataDir = shard ? shardDataDir(path.resolve(io.cwd, config.memory.dataDir), shard.id) : undefined;
    // Up before the database opens, so /healthz answers and /readyz says what it waits for.
    // Shards share the machine: each serves on its own port.
    const listen = shard ? shardListen(config.metrics.listen, shard.id) : config.metrics.listen;
    const operator = await openOperatorEndpoint({ listen, events });
    announceOperatorEndpoint(operator, logger);
    operator.readiness.require('discord', () => 'discord not connected yet');
    // SIGINT/SIGTERM replace the default exit: every wait below (opening, connecting) ends on them.
    const startStop = new AbortController();
    let stopSignal: string | undefined;
    const signalled = new Promise<string>((resolve) => {
      const stopWith = (signal: string): void => {
        stopSignal ??= signal;
        startStop.abort();
        resolve(signal);
      };
      process.once('SIGINT', () => stopWith('SIGINT'));
      process.once('SIGTERM', () => stopWith('SIGTERM'));
    });
    const opened: { app?: MagpieApp } = {};
    let opening: string | undefined;
    operator.readiness.require('database', () => opening ?? 'database not open yet');
    try {
      // An HTTP embedder that is not reachable yet (it re-embeds stored text when the embedder
      // changed) is waited out like Discord; anything else stops the start as before.
      const outcome = await retryUntilConnected({
        signal: startStop.signal,
        attempt: async () => {
          opened.app = await openApp({
            config,
            env: io.env,
            cwd: io.cwd,
            events,
            command: 'magpie start',
            ...(loaded.found ? { configFile: loaded.path } : {}),
            metrics: operator.metrics,
            ...(dataDir ? { dataDir } : {}),
            // On PostgreSQL every shard shares the schema; each holds the writer lock of its own shard.
            ...(shard ? { writerKey: `shard-${shard.id}-of-${shard.count}` } : {}),
          });
        },
        refusal: (error) => (error instanceof MagpieError && error.retryable ? undefined : error),
        onRetry: ({ attempt, error, delayMs }) => {
          const reason = errorMessage(error);
          opening = `memory not open yet (attempt ${attempt}: ${reason}); next attempt in ${Math.ceil(delayMs / 1000)} s`;
          logger.warn({ event: 'open_retry', attempt, retry_in_ms: delayMs, error: reason }, 'could not open the memory store; trying again');
        },
      });
      if (outcome === 'aborted' || !opened.app) {
        await operator.close();
        logger.info({ event: 'stopped' }, 'stopped');
        return EXIT.ok;
      }
    } catch (error) {
      await operator.close();
      throw error;
    }
    const app = opened.app;
    operator.readiness.require('database', () => databaseProblem(app));
    operator.readiness.describe('storage', () => storageState(app));
    if (app.modelProblem && config.llm.model.trim() !== '') {
      // A model was asked for but cannot be used: refuse now rather than at the first message.
      await app.close();
      await operator.close();
      io.stderr.write(`magpie start: ${app.modelProblem.render()}\n`);
      return EXIT.config;
    }
    if (!app.model) {
      logger.warn({ event: 'no_model' }, `no model configured: messages are recorded and searchable, but nobody answers (${MODEL_HINT})`);
    }
    followConfigLevel(app.config, logger, io.env);
    let watcher: ConfigWatcher | undefined;
    if (loaded.found) watcher = watchConfigFile({ path: loaded.path, live: app.config, logger, env: io.env });

    const apiBase = io.env[DISCORD_API_ENV]?.trim();
    const connectAdapter = (client: Client): DiscordAdapter =>
      new DiscordAdapter({
        client,
        runtime: app.runtime,
        responder: app.responder,
        memory: app.memory,
        config: app.config,
        events,
        workers: app.workers,
        storage: app.storage,
        dataDir: app.dataDir,
        catchUp: new CatchUpPoints(app.db),
      });
    let client = createDiscordClient(apiBase ? { restApi: apiBase } : {});
    let adapter = connectAdapter(client);
    // Set while the first connection waits out a failure: /readyz says what failed and when the next try is.
    let waiting: string | undefined;
    operator.readiness.require('discord', () => waiting ?? connectionProblem(client));

    // discord.js retries an unreachable gateway forever: without the abort, SIGTERM while
    // connecting would be ignored for good.
    const stop = startStop;
    const aborted = new Promise<never>((_, reject) => stop.signal.addEventListener('abort', () => reject(new Error('stopped')), { once: true }));
    aborted.catch(() => {});
    let outcome: 'connected' | 'aborted';
    try {
      // A network that is not there yet (DNS, refused connections, 5xx) is waited out for as long
      // as the process runs; a token or intents Discord refuses ends it with what to fix.
      outcome = await retryUntilConnected({
        signal: stop.signal,
        attempt: async (attempt) => {
          if (attempt > 1) {
            // A failed login leaves its client destroyed for good: every attempt gets a fresh one.
            await destroyClient(client).catch(() => {});
            client = createDiscordClient(apiBase ? { restApi: apiBase } : {});
            adapter = connectAdapter(client);
          }
          await Promise.race([adapter.start(token), aborted]);
          waiting = undefined;
        },
        refusal: (error) => connectRefusal(error, config.discord.tokenEnv),
        onRetry: ({ attempt, error, delayMs }) => {
          const reason = errorMessage(error);
          waiting = `discord unreachable (attempt ${attempt}: ${reason}); next attempt in ${Math.ceil(delayMs / 1000)} s`;
          logger.warn(
            { event: 'discord_connect_retry', attempt, retry_in_ms: delayMs, error: reason },
            'could not reach Discord; trying again',
          );
        },
      });
    } catch (error) {
      watcher?.close();
      await destroyClient(client).catch(() => {});
      await app.close();
      await operator.close();
      const message = error instanceof MagpieError ? error.render() : errorMessage(error);
      io.stderr.write(`magpie start: could not connect to Discord: ${message}\n`);
      return error instanceof MagpieError ? EXIT.config : EXIT.failure;
    }
    if (outcome === 'aborted') {
      logger.info({ event: 'stopping', signal: stopSignal }, 'stopping before the connection to Discord was ready');
      watcher?.close();
      await adapter.stop(0);
      await app.close();
      await operator.close();
      logger.info({ event: 'stopped' }, 'stopped');
      return EXIT.ok;
    }
    logger.info(
      { event: 'started', user: client.user?.tag, guilds: client.guilds.cache.size, data_dir: app.dataDir, ...(shard ? { shard: shard.id, shards: shard.count } : {}) },
      'magpie is running',
    );

    const signal = await signalled;
    const graceMs = app.config.current().discord.shutdownGraceMs;
    logger.info({ event: 'stopping', signal, grace_ms: graceMs }, 'stopping: finishing running replies');
    watcher?.close();
    operator.readiness.require('shutdown', () => 'shutting down');
    // The grace is for running replies, not for a lock session that is away: writes that would
    // wait for it fail now (the messages are fetched again by the next start's catch-up).
    app.connection?.beginClose();
    await adapter.stop(graceMs);
    await app.close();
    await operator.close();
    logger.info({ event: 'stopped' }, 'stopped');
    return EXIT.ok;
  },
};

/** Flag parsers throw InputError; on the command line that is a usage error. */
function usage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    throw new UsageError(errorMessage(error), USAGE);
  }
}

/**
 * The sharding manager: no data dir and no Discord connection of its own, one child process per
 * shard (each runs `magpie start` as that shard). SIGINT or SIGTERM stops them all gracefully.
 */
async function runShards(options: {
  count: ShardCount;
  idsFlag: string | undefined;
  configPath: string | undefined;
  metricsListen: string;
  token: string;
  io: CliIo;
  events: EventStream;
  logger: Logger;
}): Promise<number> {
  const { io, logger } = options;
  const apiBase = io.env[DISCORD_API_ENV]?.trim();
  let total: number;
  try {
    total = options.count === 'auto' ? await recommendedShardCount(options.token, apiBase || undefined) : options.count;
  } catch (error) {
    io.stderr.write(`magpie start: ${error instanceof MagpieError ? error.render() : errorMessage(error)}\n`);
    return EXIT.failure;
  }
  const shardIds = options.idsFlag === undefined ? undefined : usage(() => parseShardIds(options.idsFlag!, total));
  try {
    // Refused here rather than by a shard that cannot start: the highest shard's port must exist.
    shardListen(options.metricsListen, Math.max(...(shardIds ?? [total - 1])));
  } catch (error) {
    io.stderr.write(`magpie start: ${error instanceof MagpieError ? error.render() : errorMessage(error)}\n`);
    return EXIT.config;
  }
  const runner = new ShardRunner({
    file: fileURLToPath(new URL('../main.js', import.meta.url)),
    args: ['start', ...(options.configPath ? ['--config', options.configPath] : [])],
    token: options.token,
    total,
    ...(shardIds ? { shardIds } : {}),
    events: options.events,
  });
  const signalled = new Promise<string>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  logger.info({ event: 'shards_starting', shards: total, shard_ids: shardIds ?? 'all' }, 'starting shards');
  const started = runner.start().then(
    (ids) => ({ ids }),
    (error: unknown) => ({ error }),
  );
  const first = await Promise.race([started, signalled.then((signal) => ({ signal }))]);
  if ('error' in first) {
    await runner.stop(5_000);
    io.stderr.write(`magpie start: shards could not start: ${errorMessage(first.error)}\n`);
    return EXIT.failure;
  }
  if ('ids' in first) logger.info({ event: 'shards_started', shards: total, shard_ids: first.ids }, 'every shard is running');
  const signal = 'signal' in first ? first.signal : await signalled;
  logger.info({ event: 'stopping', signal }, 'stopping every shard');
  await runner.stop(60_000);
  logger.info({ event: 'stopped' }, 'stopped');
  return EXIT.ok;
}
