import os from 'node:os';
import { MagpieError } from '../../common/errors.js';
import type { SqlClient } from '../sql-client.js';

/**
 * One writer per key on a shared PostgreSQL schema: a session-level advisory lock on the
 * writer's own connection. The server drops it when that connection ends, however the process
 * ended, so it cannot go stale. `storage_writers` only names the holder for the refusal message.
 */
export async function acquirePgWriterLock(
  db: SqlClient,
  options: { key: string; command: string; schema: string },
): Promise<{ release(): Promise<void> }> {
  const { key, command, schema } = options;
  const lockId = db.prepare(`SELECT pg_try_advisory_lock(hashtextextended(current_schema() || ':writer:' || ?, 0)) AS locked`);
  const { locked } = (await lockId.get(key)) as { locked: boolean };
  if (!locked) {
    const holder = (await db.prepare('SELECT pid, host, command, started_at FROM storage_writers WHERE lock_key = ?').get(key)) as
      | { pid: number; host: string; command: string; started_at: string }
      | undefined;
    const who = holder ? `${holder.command} (pid ${holder.pid} on ${holder.host}, since ${holder.started_at})` : 'another process';
    throw new MagpieError('data_dir_locked', `${who} already writes ${key} in PostgreSQL schema ${schema}`, {
      context: { schema, key },
      hint: 'stop that process first, or give this one other shards (--shard-ids); readers (status, memory search) need no lock',
    });
  }
  await db.prepare(
    `INSERT INTO storage_writers (lock_key, pid, host, command, started_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (lock_key) DO UPDATE SET pid = excluded.pid, host = excluded.host, command = excluded.command, started_at = excluded.started_at`,
  ).run(key, process.pid, os.hostname(), command, new Date().toISOString());
  const unlock = db.prepare(`SELECT pg_advisory_unlock(hashtextextended(current_schema() || ':writer:' || ?, 0)) AS unlocked`);
  let held = true;
  return {
    async release() {
      if (!held || !db.open) return;
      held = false;
      try {
        await unlock.get(key);
      } catch {
        // The connection is gone, and the server dropped the lock with it.
      }
    },
  };
}

/** The bookkeeping table of `acquirePgWriterLock` (part of the schema's first step). */
export const STORAGE_WRITERS_TABLE = `
  CREATE TABLE IF NOT EXISTS storage_writers (
    lock_key TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    command TEXT NOT NULL,
    started_at TEXT NOT NULL
  )`;
