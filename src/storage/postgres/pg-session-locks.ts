import os from 'node:os';
import { MagpieError } from '../../common/errors.js';
import type { SqlClient } from '../sql-client.js';
import type { PgSession } from './pg-session.js';

/** A writer lock this process holds; `release` lets another process write the key. */
export interface HeldWriterLock {
  readonly key: string;
  release(): Promise<void>;
}

/**
 * One writer per key on a shared schema, on the session connection (the lock id is the one
 * pg-writer-lock.ts uses, so old and new processes exclude each other). `storage_writers`, in
 * the schema, only names the holder for the refusal message. After a reconnect the session takes
 * the lock back, or reports it lost through `session.onLost('writer:<key>')`.
 */
export async function takeWriterLock(session: PgSession, sql: SqlClient, key: string, command: string): Promise<HeldWriterLock> {
  const lockKey = `writer:${key}`;
  if (!(await session.tryLock(lockKey))) {
    const holder = (await sql.prepare('SELECT pid, host, command, started_at FROM storage_writers WHERE lock_key = ?').get(key)) as
      | { pid: number; host: string; command: string; started_at: string }
      | undefined;
    // A writer of this host that is gone (killed, crashed, restarted by its supervisor): its
    // session ends once PostgreSQL notices the closed socket, usually within milliseconds but
    // later on a busy server. Waiting a little for that beats refusing the restart.
    const gone = holder !== undefined && holder.host === os.hostname() && Number(holder.pid) !== process.pid && !processAlive(Number(holder.pid));
    if (gone && (await retryLock(session, lockKey, DEAD_HOLDER_WAIT_MS))) return recordWriter(session, sql, key, lockKey, command);
    const who = holder ? `${holder.command} (pid ${holder.pid} on ${holder.host}, since ${holder.started_at})` : 'another process';
    const shard = /^shard-(\d+)-of-(\d+)$/.exec(key);
    const what = shard ? `shard ${shard[1]} of ${shard[2]}` : 'this schema';
    throw new MagpieError('data_dir_locked', `${who} already writes ${what} in PostgreSQL (schema "${session.schema}")`, {
      // The holder's command tells `memory forget` whether it takes erasure requests.
      context: { key, ...(holder ? { pid: Number(holder.pid), host: holder.host, command: holder.command } : {}) },
      hint:
        (shard ? 'stop that process first, or give this one other shards (--shard-ids)' : 'stop that process first, or use a schema of its own ([storage] schema)') +
        '; a holder whose host went away loses the lock within about 25 s; readers (status, memory search) need no lock',
    });
  }
  return recordWriter(session, sql, key, lockKey, command);
}

/** How long a new writer waits for PostgreSQL to end the session of a holder whose process is gone. */
const DEAD_HOLDER_WAIT_MS = 10_000;

async function recordWriter(session: PgSession, sql: SqlClient, key: string, lockKey: string, command: string): Promise<HeldWriterLock> {
  await sql
    .prepare(
      `INSERT INTO storage_writers (lock_key, pid, host, command, started_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (lock_key) DO UPDATE SET pid = excluded.pid, host = excluded.host, command = excluded.command, started_at = excluded.started_at`,
    )
    .run(key, process.pid, os.hostname(), command, new Date().toISOString());
  return { key, release: () => session.unlock(lockKey) };
}

async function retryLock(session: PgSession, lockKey: string, waitMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    if (await session.tryLock(lockKey)) return true;
  }
  return false;
}

/** Whether a process of this host still runs (EPERM: it does, under another user). */
function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Per-channel compaction locks on the session connection: a process that dies mid-compaction
 * loses its locks with its connection, and its splice never committed. A lock the session could
 * not take back after a reconnect is reported through `session.onLost('compaction:<channel id>')`:
 * the compaction holding it must not land.
 */
export class SessionChannelLocks {
  constructor(private readonly session: PgSession) {}

  /** True when this process now holds the channel's compaction lock (also when it already did). */
  tryAcquire(channelId: string): Promise<boolean> {
    return this.session.tryLock(`compaction:${channelId}`);
  }

  release(channelId: string): Promise<void> {
    return this.session.unlock(`compaction:${channelId}`);
  }
}

/** Who holds each writer lock, for the refusal message (created before the migrations run). */
export const STORAGE_WRITERS_TABLE = `
  CREATE TABLE IF NOT EXISTS storage_writers (
    lock_key TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    command TEXT NOT NULL,
    started_at TEXT NOT NULL
  )`;
