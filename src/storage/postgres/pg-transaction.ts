import type pg from 'pg';
import { MagpieError } from '../../common/errors.js';
import type { PgConnections } from './pg-connections.js';
import { endedByServer, failureKind, PG_CONNECTION_LOST, PgError, pgFailure } from './pg-error.js';
import type { ResolvedPgSettings } from './pg-settings.js';

/**
 * One open transaction of `PgPoolClient`, shared by its savepoints. Its connection is checked
 * out at its first statement (an empty transaction costs nothing). Control statements (BEGIN,
 * SAVEPOINT, RELEASE, ROLLBACK TO) wait in `pending` and leave with the next statement: pipelined
 * ahead of it, or merged into a simple query (a script, the COMMIT). A connection-level failure
 * marks it `broken`: the connection is destroyed at the end, never reused.
 */
export class PgTransaction {
  broken = false;
  open = true;
  private client: pg.PoolClient | undefined;
  private acquiring: Promise<pg.PoolClient> | undefined;
  private pending: string[];
  /** Queries sent on `client` so far. */
  private sent = 0;
  /** The client's reply deadline for each statement: the pool's, or the one the transaction was opened with. */
  private readonly replyDeadlineMs: number;

  /**
   * `deadlineMs`, when given, replaces the statement and lock deadlines for this transaction
   * alone (`SET LOCAL`, sent with BEGIN) and the client's reply deadline follows it.
   */
  constructor(
    private readonly connections: PgConnections,
    private readonly settings: ResolvedPgSettings,
    deadlineMs?: number,
  ) {
    this.pending = ['BEGIN'];
    this.replyDeadlineMs = settings.queryTimeoutMs;
    if (deadlineMs !== undefined) {
      if (!Number.isInteger(deadlineMs) || deadlineMs <= 0) throw new RangeError(`a transaction deadline must be a positive integer, got ${deadlineMs}`);
      this.pending.push(`SET LOCAL statement_timeout = ${deadlineMs}`, `SET LOCAL lock_timeout = ${deadlineMs}`);
      this.replyDeadlineMs = deadlineMs + (settings.queryTimeoutMs - settings.statementTimeoutMs);
    }
  }

  /**
   * Sends one statement on the transaction's connection, with the control statements waiting to
   * go before it: pipelined as their own query, or `merged` into the statement's simple query
   * (`prefix` holds them then).
   */
  async run(statement: (prefix: string[]) => pg.QueryConfig, options: { merged: boolean }): Promise<pg.QueryResult> {
    if (!this.open) throw new Error('the transaction has already ended');
    for (let attempt = 0; ; attempt += 1) {
      const client = this.client ?? (await this.checkout());
      const prefix = this.pending;
      this.pending = [];
      const opening = this.sent === 0;
      let sentPrefix: Promise<unknown> | undefined;
      if (prefix.length > 0 && !options.merged) {
        sentPrefix = client.query(this.withDeadline({ text: prefix.join(';\n') }));
        sentPrefix.catch(() => undefined);
        this.sent += 1;
      }
      this.sent += 1;
      try {
        const result: pg.QueryResult | pg.QueryResult[] = await client.query(this.withDeadline(statement(options.merged ? prefix : [])));
        await sentPrefix;
        this.connections.succeeded();
        return last(result);
      } catch (error) {
        const kind = failureKind(error);
        if (kind === 'statement') throw pgFailure(error, this.context('statement'));
        this.connections.failed(error, { opening: false });
        this.broken = true;
        // The first statements met a connection the server had already ended: nothing ran, so the
        // transaction starts over on another connection (every idle one may have been ended).
        if (attempt < this.settings.maxConnections && opening && this.sent <= 2 && endedByServer(error)) {
          this.connections.discard(client, true);
          Object.assign(this, { client: undefined, acquiring: undefined, pending: prefix, sent: 0, broken: false });
          continue;
        }
        throw pgFailure(error, this.context('statement'));
      }
    }
  }

  /** Opens a savepoint (sent with the next statement); returns what `endSavepoint` needs. */
  openSavepoint(name: string): string {
    const opener = `SAVEPOINT ${name}`;
    this.pending.push(opener);
    return opener;
  }

  /** A savepoint nothing ran in was never sent: it is dropped; otherwise its end travels with the next statement. */
  endSavepoint(opener: string, closing: string[]): void {
    const waiting = this.pending.lastIndexOf(opener);
    if (waiting >= 0) this.pending = this.pending.slice(0, waiting);
    else this.pending.push(...closing);
  }

  async commit(): Promise<void> {
    // Nothing was sent: there is nothing to commit.
    if (this.client === undefined || this.pending.includes('BEGIN')) return;
    if (this.broken) {
      // Its connection was lost before any COMMIT was sent (a failure the body caught): the server rolled it back.
      throw new MagpieError(PG_CONNECTION_LOST, 'the PostgreSQL connection was lost before the COMMIT: nothing of the transaction was applied', {
        retryable: true,
        context: { schema: this.settings.schema },
      });
    }
    const statements = [...this.pending, 'COMMIT'];
    this.pending = [];
    let result: pg.QueryResult;
    try {
      result = last(await this.client.query(this.withDeadline({ text: statements.join(';\n') })));
    } catch (error) {
      if (failureKind(error) !== 'statement') {
        this.broken = true;
        this.connections.failed(error, { opening: false });
        throw pgFailure(error, this.context('commit'));
      }
      // The server refused the COMMIT (or a RELEASE before it): the transaction is rolled back.
      await this.rollback();
      throw pgFailure(error, this.context('statement'));
    }
    this.connections.succeeded();
    // COMMIT of a transaction a failed statement aborted answers ROLLBACK, not an error.
    if (result.command === 'ROLLBACK') {
      throw new PgError('the transaction was rolled back: a statement in it failed and the failure was caught', '25P02', undefined);
    }
  }

  async rollback(): Promise<void> {
    this.pending = [];
    if (this.client === undefined || this.broken || this.sent === 0) return;
    try {
      await this.client.query('ROLLBACK');
    } catch (error) {
      // A connection that cannot roll back is destroyed: the server rolls back what it held.
      this.broken = true;
      if (failureKind(error) !== 'statement') this.connections.failed(error, { opening: false });
    }
  }

  /** Ends it for good and gives its connection back (or destroys it when broken). */
  async end(): Promise<void> {
    this.open = false;
    const client = this.client ?? (await this.acquiring?.catch(() => undefined));
    this.client = undefined;
    if (client) this.connections.discard(client, this.broken);
  }

  private checkout(): Promise<pg.PoolClient> {
    this.acquiring ??= this.connections.checkout().then((client) => {
      if (!this.open) {
        client.release();
        throw new Error('the transaction has already ended');
      }
      this.client = client;
      return client;
    });
    return this.acquiring;
  }

  private withDeadline(config: pg.QueryConfig): pg.QueryConfig {
    return this.replyDeadlineMs === this.settings.queryTimeoutMs ? config : { ...config, query_timeout: this.replyDeadlineMs } as pg.QueryConfig;
  }

  private context(during: 'statement' | 'commit') {
    return { during, deadlineMs: this.replyDeadlineMs, schema: this.settings.schema };
  }
}

export function last(result: pg.QueryResult | pg.QueryResult[]): pg.QueryResult {
  return Array.isArray(result) ? result[result.length - 1]! : result;
}
