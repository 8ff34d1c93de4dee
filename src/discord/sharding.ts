import { ShardingManager, type Shard } from 'discord.js';
import { errorMessage, InputError, MagpieError } from '../common/errors.js';
import type { EventStream } from '../common/events.js';

/** The shard a process runs as, when discord.js's ShardingManager started it. */
export interface ShardIdentity {
  id: number;
  count: number;
}

/** How many shards to run: a number, or what Discord recommends for the bot. */
export type ShardCount = number | 'auto';

/** Discord's hard cap is far below this; a larger number is a typo. */
export const MAX_SHARDS = 4_096;

/** Parses `--shards auto|N`. */
export function parseShardCount(value: string): ShardCount {
  const text = value.trim();
  if (text === 'auto') return 'auto';
  const count = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_SHARDS) {
    throw new InputError(`--shards must be "auto" or a whole number between 1 and ${MAX_SHARDS}, got '${value}'`);
  }
  return count;
}

/** Parses `--shard-ids 0,2,5` against the total: unique ids in [0, total). */
export function parseShardIds(value: string, total: number): number[] {
  const parts = value.split(',').map((part) => part.trim());
  const ids: number[] = [];
  for (const part of parts) {
    const id = /^\d+$/.test(part) ? Number(part) : Number.NaN;
    if (!Number.isSafeInteger(id)) throw new InputError(`--shard-ids must be shard numbers separated by commas, got '${value}'`);
    if (id >= total) throw new InputError(`--shard-ids: shard ${id} does not exist with ${total} shard${total === 1 ? '' : 's'} (ids are 0 to ${total - 1})`);
    if (ids.includes(id)) throw new InputError(`--shard-ids names shard ${id} twice`);
    ids.push(id);
  }
  return ids;
}

/** The shard this process is, from the environment the ShardingManager gives its children. */
export function currentShard(env: NodeJS.ProcessEnv): ShardIdentity | undefined {
  if (env.SHARDING_MANAGER !== 'true') return undefined;
  const id = Number(env.SHARDS);
  const count = Number(env.SHARD_COUNT);
  if (!Number.isSafeInteger(id) || !Number.isSafeInteger(count) || id < 0 || id >= count) {
    throw new MagpieError('bad_shard_env', `started by a sharding manager with SHARDS=${env.SHARDS} and SHARD_COUNT=${env.SHARD_COUNT}`, {
      hint: 'run magpie start --shards N instead of setting SHARDING_MANAGER by hand',
    });
  }
  return { id, count };
}

/**
 * Discord's recommended shard count for the bot (`GET /gateway/bot`), through the same API base
 * the bot uses (discord.js's own helper always asks discord.com, which a proxy or a test cannot
 * stand in for).
 */
export async function recommendedShardCount(token: string, apiBase = 'https://discord.com/api'): Promise<number> {
  let response: Response;
  try {
    response = await fetch(`${apiBase.replace(/\/$/, '')}/v10/gateway/bot`, { headers: { authorization: `Bot ${token}` } });
  } catch (error) {
    throw new MagpieError('discord_unreachable', `could not ask Discord how many shards to run: ${errorMessage(error)}`, {
      cause: error,
      retryable: true,
      hint: 'check the network, or pass --shards N',
    });
  }
  const body = (await response.json().catch(() => ({}))) as { shards?: unknown };
  if (!response.ok || typeof body.shards !== 'number' || !Number.isSafeInteger(body.shards) || body.shards < 1) {
    throw new MagpieError('discord_gateway', `Discord answered GET /gateway/bot with status ${response.status} and no shard count`, {
      hint: response.status === 401 ? 'the bot token is wrong' : 'pass --shards N',
    });
  }
  return body.shards;
}

export interface ShardRunnerOptions {
  /** The CLI entry point each shard process runs (`magpie start` again, as a shard). */
  file: string;
  /** Arguments of the shard processes (`start --config FILE`). */
  args: string[];
  token: string;
  total: number;
  /** The shards this machine runs; default all. */
  shardIds?: number[];
  events: EventStream;
  /** Between two shards' logins: Discord lets a bot identify once per 5 seconds. */
  spawnDelayMs?: number;
}

/**
 * discord.js's own ShardingManager, one process per shard. A shard that dies is started again;
 * `stop` sends each shard SIGTERM (it finishes its running replies and closes its data dir) and
 * waits for them to exit.
 */
export class ShardRunner {
  private readonly manager: ShardingManager;

  constructor(private readonly options: ShardRunnerOptions) {
    this.manager = new ShardingManager(options.file, {
      totalShards: options.total,
      ...(options.shardIds ? { shardList: options.shardIds } : {}),
      mode: 'process',
      respawn: true,
      shardArgs: options.args,
      execArgv: process.execArgv,
      token: options.token,
    });
    this.manager.on('shardCreate', (shard: Shard) => {
      options.events.emit({ type: 'shard_started', shard: shard.id, shards: options.total });
      shard.on('death', () => options.events.emit({ type: 'shard_exited', shard: shard.id, respawn: this.manager.respawn }));
      shard.on('error', (error) => options.events.emit({ type: 'shard_error', shard: shard.id, error: errorMessage(error) }));
    });
  }

  /** Starts every shard, one after another; resolves when all are connected. */
  async start(): Promise<number[]> {
    await this.manager.spawn({ amount: this.options.total, delay: this.options.spawnDelayMs ?? 5_500, timeout: 180_000 });
    return [...this.manager.shards.keys()];
  }

  /** Stops every shard process and waits (at most `waitMs`) for them to exit. */
  async stop(waitMs: number): Promise<void> {
    this.manager.respawn = false;
    const exits: Array<Promise<void>> = [];
    for (const shard of this.manager.shards.values()) {
      const child = shard.process;
      if (!child || child.exitCode !== null) continue;
      exits.push(new Promise<void>((resolve) => child.once('exit', () => resolve())));
      child.kill('SIGTERM');
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(exits), new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
    for (const shard of this.manager.shards.values()) if (shard.process && shard.process.exitCode === null) shard.process.kill('SIGKILL');
  }
}
