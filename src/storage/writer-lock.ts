import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { MagpieError } from '../common/errors.js';

/** The file whose OS-level lock says "a writer is here" (an empty SQLite database). */
export const WRITER_LOCK_FILE = 'writer.lock';
/** Who holds the lock: pid, host, command, since when (for the refusal message). */
export const WRITER_OWNER_FILE = 'writer.json';

export interface WriterOwner {
  pid: number;
  host: string;
  command: string;
  started_at: string;
}

/**
 * One writer per data dir. The guarantee comes from the operating system: the lock is an
 * exclusive SQLite transaction held open on `writer.lock` for the life of the writer, i.e. an
 * fcntl lock that the kernel drops when the process ends, even on `kill -9`. A lock can
 * therefore never go stale; `writer.json` only names the holder for the message a second writer
 * gets, and is overwritten by the next holder.
 */
export class WriterLock {
  private constructor(
    private readonly handle: Database.Database,
    readonly dataDir: string,
    readonly owner: WriterOwner,
  ) {}

  /** Takes the lock at once or throws a `data_dir_locked` error naming the holder. */
  static acquire(dataDir: string, options: { command: string }): WriterLock {
    let handle: Database.Database;
    try {
      handle = lockHandle(dataDir);
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) throw lockedError(dataDir, readOwner(dataDir));
      // Something else sits at writer.lock (garbage, a directory): it holds no lock, so it is
      // moved aside and the lock taken on a fresh file.
      const path = join(dataDir, WRITER_LOCK_FILE);
      try {
        renameSync(path, `${path}.moved-${new Date().toISOString().replace(/[:.]/g, '-')}`);
      } catch {
        throw error;
      }
      handle = lockHandle(dataDir);
    }
    const owner: WriterOwner = { pid: process.pid, host: os.hostname(), command: options.command, started_at: new Date().toISOString() };
    try {
      writeFileSync(join(dataDir, WRITER_OWNER_FILE), `${JSON.stringify(owner)}\n`);
    } catch {
      // Only the refusal message of a second writer is less precise; the lock itself holds.
    }
    return new WriterLock(handle, dataDir, owner);
  }

  get held(): boolean {
    return this.handle.open;
  }

  release(): void {
    if (!this.handle.open) return;
    try {
      this.handle.exec('ROLLBACK');
    } finally {
      this.handle.close();
    }
  }
}

/** An exclusive transaction on the lock file, or the error that refused it. */
function lockHandle(dataDir: string): Database.Database {
  const handle = new Database(join(dataDir, WRITER_LOCK_FILE), { timeout: 0 });
  try {
    handle.exec('BEGIN EXCLUSIVE');
    return handle;
  } catch (error) {
    handle.close();
    throw error;
  }
}

/** The recorded holder, if its record is readable and its process may still be alive. */
export function readOwner(dataDir: string): WriterOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(join(dataDir, WRITER_OWNER_FILE), 'utf8')) as WriterOwner;
    if (typeof owner.pid !== 'number' || typeof owner.command !== 'string') return undefined;
    // A record left by a dead process on this host names nobody (the new holder has not written yet).
    if (owner.host === os.hostname() && !processAlive(owner.pid)) return undefined;
    return owner;
  } catch {
    return undefined;
  }
}

/** Whether a process of this host still runs (EPERM: it does, under another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function lockedError(dataDir: string, owner: WriterOwner | undefined): MagpieError {
  const holder = owner
    ? `${owner.command} (pid ${owner.pid} on ${owner.host}, since ${owner.started_at})`
    : 'another Magpie process';
  return new MagpieError('data_dir_locked', `the data directory ${dataDir} is in use by ${holder}`, {
    context: { dataDir, ...(owner ? { pid: owner.pid, host: owner.host, command: owner.command } : {}) },
    hint:
      'only one process may write a data dir at a time: stop that one first, or give this one another --data-dir; ' +
      'read-only commands (magpie memory search, list, stats) work beside it',
  });
}
