import { MagpieError } from '../common/errors.js';
import { splitListen } from '../config/validate-values.js';

const MAX_PORT = 65_535;

/**
 * Where shard `shardId` serves its metrics: `[metrics] listen` with the port raised by the shard
 * id (shard 0 on the configured port, shard 1 on the next, …), since every shard is a process
 * of its own on the same machine. Port 0 (any free port) and "" (off) stay as they are.
 */
export function shardListen(listen: string, shardId: number): string {
  if (listen.trim() === '') return listen;
  const { host, port } = splitListen(listen);
  if (port === 0 || shardId === 0) return listen;
  const shifted = port + shardId;
  if (shifted > MAX_PORT) {
    throw new MagpieError('metrics_shard_port', `shard ${shardId} would serve metrics on port ${shifted}, above ${MAX_PORT} ([metrics] listen ${listen} + shard id)`, {
      context: { key: 'metrics.listen', listen },
      hint: `set [metrics] listen to a port at most ${MAX_PORT - shardId}, to port 0 (any free port), or to "" to turn metrics off`,
    });
  }
  return `${host.includes(':') ? `[${host}]` : host}:${shifted}`;
}
