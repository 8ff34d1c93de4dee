import type { Migration } from '../storage/database.js';
import type { SqlClient } from '../storage/sql-client.js';

/**
 * One row per worker, so that a restart knows which were running when the process stopped.
 * A worker's only visible effect on the channel is its report, written in the same
 * transaction that marks the row finished: a row still `running` at start-up never reported.
 */
export const WORKER_MIGRATIONS: readonly Migration[] = [
  {
    name: 'worker-001-init',
    async up(db) {
      await db.exec(`
        CREATE TABLE worker_tasks (
          id TEXT PRIMARY KEY,
          channel_id TEXT NOT NULL,
          task TEXT NOT NULL,
          status TEXT NOT NULL,
          requested_by TEXT,
          segment INTEGER NOT NULL DEFAULT 0,
          tokens INTEGER NOT NULL DEFAULT 0,
          started_at INTEGER NOT NULL,
          finished_at INTEGER
        );
        CREATE INDEX worker_tasks_running ON worker_tasks (status) WHERE status = 'running';
      `);
    },
    postgres: `
        CREATE TABLE worker_tasks (
          id TEXT PRIMARY KEY,
          channel_id TEXT NOT NULL,
          task TEXT NOT NULL,
          status TEXT NOT NULL,
          requested_by TEXT,
          segment BIGINT NOT NULL DEFAULT 0,
          tokens BIGINT NOT NULL DEFAULT 0,
          started_at BIGINT NOT NULL,
          finished_at BIGINT
        );
        CREATE INDEX worker_tasks_running ON worker_tasks (status) WHERE status = 'running';
      `,
  },
];

/** How a worker ended; `running` until then. */
export type WorkerStatus = 'running' | 'completed' | 'failed' | 'timed_out' | 'max_segments' | 'cancelled' | 'interrupted';

export interface WorkerRow {
  id: string;
  channelId: string;
  task: string;
  status: WorkerStatus;
  requestedBy: string | null;
  segment: number;
  tokens: number;
  startedAt: number;
  finishedAt: number | null;
}

interface RawRow {
  id: string;
  channel_id: string;
  task: string;
  status: WorkerStatus;
  requested_by: string | null;
  segment: number;
  tokens: number;
  started_at: number;
  finished_at: number | null;
}

export class WorkerStore {
  constructor(private readonly db: SqlClient) {}

  async insert(row: { id: string; channelId: string; task: string; requestedBy?: string; startedAt: number }): Promise<void> {
    await this.db
      .prepare(`INSERT INTO worker_tasks (id, channel_id, task, status, requested_by, started_at) VALUES (?, ?, ?, 'running', ?, ?)`)
      .run(row.id, row.channelId, row.task, row.requestedBy ?? null, row.startedAt);
  }

  async progress(id: string, segment: number, tokens: number): Promise<void> {
    await this.db.prepare(`UPDATE worker_tasks SET segment = ?, tokens = ? WHERE id = ? AND status = 'running'`).run(segment, tokens, id);
  }

  async finish(id: string, status: Exclude<WorkerStatus, 'running'>, finishedAt: number): Promise<void> {
    await this.db.prepare(`UPDATE worker_tasks SET status = ?, finished_at = ? WHERE id = ?`).run(status, finishedAt, id);
  }

  async running(): Promise<WorkerRow[]> {
    return ((await this.db.prepare(`SELECT * FROM worker_tasks WHERE status = 'running' ORDER BY started_at`).all()) as RawRow[]).map(fromRaw);
  }

  async get(id: string): Promise<WorkerRow | undefined> {
    const raw = (await this.db.prepare('SELECT * FROM worker_tasks WHERE id = ?').get(id)) as RawRow | undefined;
    return raw ? fromRaw(raw) : undefined;
  }
}

function fromRaw(raw: RawRow): WorkerRow {
  return {
    id: raw.id,
    channelId: raw.channel_id,
    task: raw.task,
    status: raw.status,
    requestedBy: raw.requested_by,
    segment: raw.segment,
    tokens: raw.tokens,
    startedAt: raw.started_at,
    finishedAt: raw.finished_at,
  };
}
