import { errorMessage, MagpieError } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import { NO_CHANGE_FEED, type ChangeFeed } from '../common/change-feed.js';
import type { SqlClient } from '../storage/sql-client.js';
import { storageError } from '../storage/storage-error.js';

/**
 * Erasures asked for while the bot runs. `magpie memory forget` cannot take the writer lock the
 * bot holds, so it leaves a request in the database; the bot, woken by PostgreSQL (a trigger on
 * the table notifies on insert) or polling a few times a second on SQLite, applies it exactly as it applies a delete in Discord and writes back the outcome, which the
 * command waits for. Nothing of the erased text is stored here: an archive id or a user id.
 */

export type ErasureKind = 'item' | 'user';

export interface ErasureRequest {
  id: number;
  kind: ErasureKind;
  target: string;
  status: 'pending' | 'done' | 'failed';
  /** JSON: the counts of a user erasure, what an item was, or the error. */
  result: string | null;
}

/** How often the bot looks for requests on SQLite: an erasure applies within a second. */
export const ERASURE_POLL_MS = 250;

/**
 * How often it looks anyway where requests wake it (PostgreSQL): a wake-up lost between two
 * reconnects, or a request from a writer without the trigger, still applies.
 */
export const ERASURE_SAFETY_POLL_MS = 30_000;

/** A claim older than this is taken as abandoned (its process died mid-way) and the request is claimed again. */
const ERASURE_CLAIM_STALE_MS = 120_000;

export class ErasureRequests {
  private readonly statements;
  /** Who claims requests here: unique per process and poller. */
  private readonly claimant = `${process.pid}-${Math.random().toString(36).slice(2, 10)}`;

  constructor(db: SqlClient) {
    this.statements = {
      submit: db.prepare(`INSERT INTO erasure_requests (kind, target, requested_at) VALUES (?, ?, ?) RETURNING id`),
      read: db.prepare('SELECT id, kind, target, status, result FROM erasure_requests WHERE id = ?'),
      pending: db.prepare(
        `SELECT r.id, r.kind, r.target, r.status, r.result FROM erasure_requests r
         LEFT JOIN erasure_claims c ON c.request_id = r.id
         WHERE r.status = 'pending' AND (c.request_id IS NULL OR c.claimed_by = ? OR c.claimed_at < ?) ORDER BY r.id LIMIT 16`,
      ),
      // Serial by the claim's primary key: a second process's insert waits for the first to
      // commit, then meets the conflict, and its update applies only to its own or a stale claim.
      claim: db.prepare(
        `INSERT INTO erasure_claims (request_id, claimed_by, claimed_at) VALUES (?, ?, ?)
         ON CONFLICT (request_id) DO UPDATE SET claimed_by = excluded.claimed_by, claimed_at = excluded.claimed_at
         WHERE erasure_claims.claimed_by = excluded.claimed_by OR erasure_claims.claimed_at < ?`,
      ),
      finish: db.prepare('UPDATE erasure_requests SET status = ?, result = ?, finished_at = ? WHERE id = ?'),
      withdraw: db.prepare("DELETE FROM erasure_requests WHERE id = ? AND status = 'pending'"),
      unclaim: db.prepare('DELETE FROM erasure_claims WHERE request_id = ?'),
    };
  }

  async submit(kind: ErasureKind, target: string): Promise<number> {
    return Number(((await this.statements.submit.get(kind, target, Date.now())) as { id: number | string }).id);
  }

  async read(id: number): Promise<ErasureRequest | undefined> {
    return normalize((await this.statements.read.get(id)) as ErasureRequest | undefined);
  }

  /** Requests nobody else has claimed (or whose claim went stale): this process's own are tried again. */
  async pending(now: number = Date.now()): Promise<ErasureRequest[]> {
    return ((await this.statements.pending.all(this.claimant, now - ERASURE_CLAIM_STALE_MS)) as ErasureRequest[]).map((row) => normalize(row)!);
  }

  /** True when this process now owns the request (no other process applies it). */
  async claim(id: number, now: number = Date.now()): Promise<boolean> {
    return (await this.statements.claim.run(id, this.claimant, now, now - ERASURE_CLAIM_STALE_MS)).changes > 0;
  }

  async finish(id: number, status: 'done' | 'failed', result: unknown): Promise<void> {
    await this.statements.finish.run(status, JSON.stringify(result), Date.now(), id);
  }

  /** Takes back a request no one has finished: true when it is gone, false when it was done meanwhile. */
  async withdraw(id: number): Promise<boolean> {
    const withdrawn = (await this.statements.withdraw.run(id)).changes > 0;
    if (withdrawn) await this.statements.unclaim.run(id);
    return withdrawn;
  }
}

function normalize(row: ErasureRequest | undefined): ErasureRequest | undefined {
  return row ? { ...row, id: Number(row.id) } : undefined;
}

/** What the bot does with a request: the same calls as `/memory forget` and `forget --user`. */
export interface ErasureApplier {
  forgetItem(id: string): Promise<'message' | 'memory' | undefined>;
  forgetUser(userId: string, requestedFrom: string): Promise<unknown>;
  privacySettled(): Promise<void>;
}

/**
 * The bot's side: applies pending requests one at a time, when the change feed says one arrived
 * (and after it reconnected), and on a timer. A request that fails is marked failed with its
 * error (the command reports it); the poller goes on.
 */
export class ErasurePoller {
  private readonly timer: NodeJS.Timeout;
  private running: Promise<void> | undefined;
  /** A wake-up came while a pass ran: that pass may have read the table before the request. */
  private again = false;
  private closed = false;
  private readonly detach: (() => void)[];

  constructor(
    private readonly requests: ErasureRequests,
    private readonly applier: ErasureApplier,
    private readonly events: EventStream,
    intervalMs?: number,
    feed: ChangeFeed = NO_CHANGE_FEED,
  ) {
    this.timer = setInterval(() => void this.poll(), intervalMs ?? (feed.live ? ERASURE_SAFETY_POLL_MS : ERASURE_POLL_MS));
    this.timer.unref();
    this.detach = [
      feed.subscribe((change) => {
        if (change.kind === 'erasure_requested') void this.poll();
      }),
      feed.onResubscribed(() => void this.poll()),
    ];
  }

  /** Applies what is pending now (wake-ups and the timer call it; tests may too). */
  poll(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const pass = async (): Promise<void> => {
      do {
        this.again = false;
        await this.drain();
      } while (this.again && !this.closed);
    };
    this.running = pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    for (const detach of this.detach) detach();
    await this.running;
  }

  private async drain(): Promise<void> {
    let pending: ErasureRequest[];
    try {
      pending = await this.requests.pending();
    } catch (error) {
      this.events.emit({ type: 'erasure_request_failed', request_id: null, error: errorMessage(error) });
      return;
    }
    for (const request of pending) {
      if (this.closed) return;
      const started = performance.now();
      try {
        // Another process serving the same store took it first.
        if (!(await this.requests.claim(request.id))) continue;
      } catch (error) {
        // The database is failing: the request stays pending and is tried again.
        this.events.emit({ type: 'erasure_request_failed', request_id: request.id, kind: request.kind, error: errorMessage(error) });
        continue;
      }
      try {
        const result =
          request.kind === 'user'
            ? await this.applier.forgetUser(request.target, 'cli')
            : { forgot: (await this.applier.forgetItem(request.target)) ?? null };
        await this.applier.privacySettled();
        await this.requests.finish(request.id, 'done', result);
        this.events.emit({ type: 'erasure_request_applied', request_id: request.id, kind: request.kind, duration_ms: Math.round(performance.now() - started) });
      } catch (error) {
        this.events.emit({ type: 'erasure_request_failed', request_id: request.id, kind: request.kind, error: errorMessage(error) });
        try {
          await this.requests.finish(request.id, 'failed', { error: errorMessage(error) });
        } catch {
          // The database is failing: the request stays pending and is tried again.
        }
      }
    }
  }
}

/**
 * The command's side: leaves the request and waits for the bot's outcome. Refuses with a clear
 * error when the running writer is too old to take requests, or does not answer in time.
 * `writerGone` is asked while it waits: once the writer has exited, nobody is left to apply the
 * request, so it is withdrawn (undefined is returned) for the caller to apply itself, rather
 * than left for whichever writer opens the data dir next.
 */
export async function requestErasure(
  db: SqlClient,
  kind: ErasureKind,
  target: string,
  options: { timeoutMs: number; writerGone?: () => boolean },
): Promise<ErasureRequest | undefined> {
  const requests = new ErasureRequests(db);
  let id: number;
  try {
    id = await requests.submit(kind, target);
  } catch (error) {
    // A writer older than erasure requests has no table for them.
    if (missingTable(error)) {
      throw new MagpieError('erasure_unsupported', `the running Magpie does not take erasure requests (${errorMessage(error)})`, {
        hint: 'stop the bot and run the command again, or upgrade the running bot first',
      });
    }
    throw new MagpieError('erasure_request_failed', `could not leave the erasure request for the running bot (${errorMessage(error)})`, {
      cause: error,
      hint: 'check that the database is reachable and run the command again; if the request did reach the bot, the id then matches nothing',
    });
  }
  const deadline = Date.now() + options.timeoutMs;
  let lastFailure: unknown;
  for (;;) {
    try {
      const request = await requests.read(id);
      if (request && request.status !== 'pending') return request;
      if (options.writerGone?.() && (await requests.withdraw(id))) return undefined;
    } catch (error) {
      // The request is committed and the bot applies it whatever happens here: a blip of the
      // database must not end the wait with an error that reads as if nothing was asked.
      if (storageError('', error)?.retryable !== true) throw error;
      lastFailure = error;
    }
    if (Date.now() > deadline) {
      const why = lastFailure === undefined ? '' : ` (its outcome could not be read: ${errorMessage(lastFailure)})`;
      throw new MagpieError('erasure_timeout', `the running bot did not apply erasure request ${id} within ${Math.round(options.timeoutMs / 1000)} s${why}`, {
        hint: 'it stays queued and is applied when the bot next polls; check the bot is healthy (its log, /readyz)',
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The table is not there: SQLite's "no such table", PostgreSQL's undefined_table. */
function missingTable(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === '42P01' || /no such table/i.test(errorMessage(error));
}
