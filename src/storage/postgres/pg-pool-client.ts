import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import { MagpieError } from '../../common/errors.js';
import { runCommitted, type SqlClient, type SqlQuery, type TransactionMode, type TransactionOptions } from '../sql-client.js';
import { PgCatalog } from './pg-catalog.js';
import { failureKind, neverRan, pgFailure, redactUrl } from './pg-error.js';
import { PgConnections } from './pg-connections.js';
import type { PgHealth } from './pg-health.js';
import { PgLane, ReadLanes, type LaneSend } from './pg-lane.js';
import { passWriteFence } from './pg-write-fence.js';
import { isWrite, PgPoolQuery, type PgPrepared, type PgResult, type PgRunner } from './pg-pool-query.js';
import { resolvePgSettings, type PgConnectionSettings, type ResolvedPgSettings } from './pg-settings.js';
import { last, PgTransaction } from './pg-transaction.js';
import { translateStatement } from './translate-sql.js';

/** What an async context inside `transaction(fn)` sees: its transaction and how deep it is nested. */
interface Frame {
  transaction: PgTransaction;
  depth: number;
  open: boolean;
  /** Shared by a transaction's frames: what runs once it committed. */
  committed: Array<() => void>;
}

/**
 * `SqlClient` on `pg.Pool`, on the main event loop: no thread, nothing ever waits synchronously.
 *
 * - Statements are written for SQLite and translated (`translate-sql.ts`); the catalog completes
 *   REPLACE and `lastInsertRowid` (`pg-catalog.ts`). int8/numeric come back as numbers, bytea as
 *   Buffers, a server error as a `PgError` with its SQLSTATE.
 * - Outside a transaction, writes share one pipelined connection (`pg-lane.ts`): they take
 *   effect in the order they were issued, as on SQLite, without waiting a round trip each. A read
 *   issued while writes are in flight queues behind them there (so it sees them); otherwise it
 *   goes to the least busy of a few pipelined read lanes, so a burst of reads (a thousand
 *   channels loading at once) costs round trips per lane, not per statement, and is not held to
 *   one statement per pooled connection. A read may see a write issued after it.
 * - `transaction(fn)` binds to the async context: its statements go to one connection, checked
 *   out at the first statement (`pg-transaction.ts`). BEGIN (and SAVEPOINT, RELEASE) are sent
 *   pipelined with the next statement, so they cost no round trip of their own.
 *   `immediate`/`exclusive` are a plain BEGIN at READ COMMITTED: a transaction that must be
 *   serial takes its own row or advisory locks, and says so where it does.
 * - Deadlines: `statement_timeout` and `lock_timeout` on the server, a client reply deadline
 *   (`query_timeout`), a connect deadline, TCP keepalive (see pg-settings.ts). A connection that
 *   timed out or dropped is destroyed, never returned to the pool; the pool opens a new one.
 * - Failures: a lost connection is `storage_connection` and a passed deadline `storage_timeout`,
 *   both retryable (`withStorageRetry` retries them with backoff). A statement that certainly did
 *   not run (the server ended its session first, or the connection was already known dead) runs
 *   again on another connection, and a read whose connection dropped is tried once more.
 * - A COMMIT that got no answer raises `storage_commit_unknown` (not retryable): the transaction
 *   may or may not have been applied, so the caller must read back what it wrote before deciding
 *   what it holds in memory, and must not assume either outcome. So does a write outside a
 *   transaction whose answer never came: it commits on its own.
 * - `health` says `up`, `reconnecting` or `down`; while not up a probe retries with backoff.
 * - Session state (SET, temporary tables, session advisory locks, LISTEN) has no place on a pool
 *   whose connections come and go: locks live on `PgSession`, LISTEN on `PgNotifications`.
 */
export class PgPoolClient implements SqlClient, PgRunner {
  readonly dialect = 'postgres' as const;
  readonly settings: ResolvedPgSettings;
  private readonly connections: PgConnections;
  private readonly context = new AsyncLocalStorage<Frame>();
  private readonly queries = new Map<string, PgPoolQuery>();
  private readonly catalog = new PgCatalog();
  private readonly lane: PgLane;
  /** Pipelined connections for reads while no write is in flight (none on a pool too small to spare them). */
  private readonly readLanes: ReadLanes;
  private cursors = 0;
  private isOpen = true;
  private writesRefused: MagpieError | undefined;
  private writeFence: (() => Promise<void> | undefined) | undefined;

  constructor(settings: PgConnectionSettings) {
    this.settings = resolvePgSettings(settings);
    this.connections = new PgConnections(this.settings, () => this.outside(() => (client) => client.query('SELECT 1'), { write: false, pool: true }));
    this.lane = new PgLane(this.connections);
    this.readLanes = new ReadLanes(this.connections, this.settings.maxConnections);
  }

  /** A client whose server answered and whose schema exists; a server that cannot be reached is a clear error. */
  static async connect(settings: PgConnectionSettings): Promise<PgPoolClient> {
    const client = new PgPoolClient(settings);
    try {
      if (client.settings.readOnly) await client.prepare('SELECT 1 AS up').get();
      else {
        await client.exec(`CREATE SCHEMA IF NOT EXISTS "${client.settings.schema}"`).catch((error: { code?: string }) => {
          // Two processes creating the schema at once: the loser sees a unique violation.
          if (error.code !== '23505' && error.code !== '42P06') throw error;
        });
      }
    } catch (error) {
      await client.close();
      throw new MagpieError('postgres_unreachable', `cannot use PostgreSQL at ${redactUrl(client.settings.url)}: ${(error as Error).message}`, {
        cause: error,
        context: { url: redactUrl(client.settings.url), schema: client.settings.schema },
        hint: 'check [storage] url_env (default MAGPIE_DATABASE_URL) and that the server accepts connections from here',
      });
    }
    return client;
  }

  get open(): boolean {
    return this.isOpen;
  }

  get inTransaction(): boolean {
    return this.frame() !== undefined;
  }

  /** The pool less the write lane and the read lanes, each holding a connection while busy. */
  get transactionSlots(): number {
    return Math.max(1, this.settings.maxConnections - 1 - this.readLanes.size);
  }

  get health(): PgHealth {
    return this.connections.health;
  }

  /**
   * From now on every write (and every transaction) fails with `writer_lock_lost`: another
   * process writes these channels, so this one must not. Reads go on.
   */
  refuseWrites(reason: string): void {
    this.writesRefused ??= new MagpieError('writer_lock_lost', `this process no longer writes to PostgreSQL: ${reason}`, {
      context: { schema: this.settings.schema },
      hint: 'restart it once the other writer has stopped (or give it other shards with --shard-ids)',
    });
  }

  /**
   * Writes (and transactions) started while `fence` returns a promise wait for it first, up to
   * the statement deadline: while the lock session reconnects, this process does not know
   * whether it still holds its writer lock, and must not write until it does (or hears it lost
   * it: then `refuseWrites` has been called and the write fails with `writer_lock_lost`). A
   * fence that rejects fails the waiting writes with its error (the store is closing).
   */
  fenceWrites(fence: () => Promise<void> | undefined): void {
    this.writeFence = fence;
  }

  /** Returns a function that removes the listener. */
  onHealthChange(listener: (health: PgHealth) => void): () => void {
    return this.connections.onHealthChange(listener);
  }

  prepare(sql: string): SqlQuery {
    let query = this.queries.get(sql);
    if (!query) {
      const statement = translateStatement(sql);
      query = new PgPoolQuery(this, { statement, name: `m${this.queries.size + 1}`, write: isWrite(statement.text) }, false);
      this.queries.set(sql, query);
    }
    return query;
  }

  async exec(sql: string): Promise<void> {
    this.assertWritable();
    const frame = this.frame();
    if (!frame && this.fenced) await this.passFence();
    if (frame) {
      await frame.transaction.run((prefix) => ({ text: [...prefix, sql].join(';\n') }), { merged: true });
      return;
    }
    await this.outside(() => (client) => client.query(sql), { write: true });
  }

  async pragma(_source?: string): Promise<never> {
    throw new Error('PRAGMA is SQLite only');
  }

  async transaction<T>(fn: () => Promise<T> | T, _mode: TransactionMode = 'deferred', options: TransactionOptions = {}): Promise<T> {
    this.assertOpen();
    this.assertWritable();
    const outer = this.frame();
    // A savepoint keeps the deadline of the transaction it is in.
    if (outer) return this.savepoint(outer, fn);
    if (this.fenced) await this.passFence();
    // Writes issued before the transaction are visible inside it.
    await this.lane.settled();
    const transaction = new PgTransaction(this.connections, this.settings, options.deadlineMs);
    const frame: Frame = { transaction, depth: 0, open: true, committed: [] };
    try {
      let result: T;
      try {
        result = await this.context.run(frame, fn);
      } catch (error) {
        frame.open = false;
        await transaction.rollback();
        throw error;
      }
      frame.open = false;
      await transaction.commit();
      runCommitted(frame.committed);
      return result;
    } finally {
      frame.open = false;
      await transaction.end();
    }
  }

  afterCommit(callback: () => void): void {
    const frame = this.frame();
    if (!frame) {
      callback();
      return;
    }
    frame.committed.push(callback);
  }

  async close(): Promise<void> {
    if (!this.isOpen) return;
    this.isOpen = false;
    this.lane.release();
    this.readLanes.release();
    await this.connections.close();
    // Off Node's list of live AsyncLocalStorages, as a closed SerialClient's (see there).
    this.context.disable();
  }

  /** Runs one prepared statement where the caller's context says; used by `PgPoolQuery`. */
  async execute(prepared: PgPrepared, values: unknown[]): Promise<PgResult> {
    this.assertOpen();
    if (prepared.write) this.assertWritable();
    const frame = this.frame();
    // Only a fenced write awaits here: the others keep their order on the lane without a turn.
    if (prepared.write && !frame && this.fenced) await this.passFence();
    if (frame) {
      const text = await this.completedText(prepared, frame.transaction);
      return shape(await frame.transaction.run(() => statementQuery(prepared, text, values), { merged: false }));
    }
    const send = (text: string): LaneSend => (client) => client.query(statementQuery(prepared, text, values));
    const prepare = () => (prepared.text !== undefined ? send(prepared.text) : this.completedText(prepared, undefined).then(send));
    return shape(await this.outside(prepare, { write: prepared.write }));
  }

  /**
   * Streams through a server-side cursor (DECLARE … FETCH n): inside a transaction on its
   * connection, otherwise in a transaction of its own, on a connection held until the scan ends.
   */
  async *batches(prepared: PgPrepared, values: unknown[]): AsyncGenerator<PgResult> {
    this.assertOpen();
    const frame = this.frame();
    if (frame) {
      yield* this.scan(frame.transaction, prepared, values);
      return;
    }
    // It sees the writes issued before it.
    await this.lane.settled();
    const transaction = new PgTransaction(this.connections, this.settings);
    let finished = false;
    try {
      yield* this.scan(transaction, prepared, values);
      finished = true;
    } finally {
      // The COMMIT of a read: nothing to lose, so its outcome needs no resolving.
      if (finished) await transaction.commit().catch(() => undefined);
      else await transaction.rollback();
      await transaction.end();
    }
  }

  private async *scan(transaction: PgTransaction, prepared: PgPrepared, values: unknown[]): AsyncGenerator<PgResult> {
    const name = `magpie_cursor_${(this.cursors += 1)}`;
    const text = await this.completedText(prepared, transaction);
    await transaction.run(() => ({ text: `DECLARE ${name} NO SCROLL CURSOR FOR ${text}`, values }), { merged: false });
    const fetch = `FETCH ${this.settings.iterateBatch} FROM ${name}`;
    try {
      for (let done = false; !done; ) {
        const batch = shape(await transaction.run(() => ({ text: fetch }), { merged: false }));
        done = batch.rows.length < this.settings.iterateBatch;
        if (batch.rows.length > 0) yield batch;
      }
    } finally {
      // Left early (or done): the cursor goes, the transaction it lived in goes on.
      if (transaction.open && !transaction.broken) {
        await transaction.run(() => ({ text: `CLOSE ${name}` }), { merged: false }).catch(() => undefined);
      }
    }
  }

  private frame(): Frame | undefined {
    const frame = this.context.getStore();
    return frame !== undefined && frame.open && frame.transaction.open ? frame : undefined;
  }

  private assertOpen(): void {
    if (!this.isOpen) throw new Error('the PostgreSQL client is closed');
  }

  private assertWritable(): void {
    if (this.writesRefused) throw this.writesRefused;
  }

  /** Whether the write fence is up now. */
  private get fenced(): boolean {
    const up = this.writeFence?.();
    return up !== undefined;
  }

  /** Waits while the write fence is up (at most the statement deadline), then writes or refuses. */
  private async passFence(): Promise<void> {
    if (this.writeFence) await passWriteFence(this.writeFence, this.settings.queryTimeoutMs, this.settings.schema);
    this.assertWritable();
  }

  /** The statement's final text, asking the catalog on the caller's connection the first time. */
  private async completedText(prepared: PgPrepared, transaction: PgTransaction | undefined): Promise<string> {
    if (prepared.text !== undefined) return prepared.text;
    if (!prepared.statement.replace && !(prepared.statement.insertInto && !prepared.statement.hasReturning)) {
      prepared.text = prepared.statement.text;
      return prepared.text;
    }
    const query = async (text: string, values: unknown[]) =>
      transaction
        ? (await transaction.run(() => ({ text, values }), { merged: false })).rows
        : // On the pool, never the lane: the statement asking may hold the lane's head, waiting for this answer.
          (await this.outside(() => (client) => client.query({ text, values }), { write: false, pool: true })).rows;
    const completed = await this.catalog.complete(prepared.statement, query);
    if (completed.final) prepared.text = completed.text;
    return completed.text;
  }

  /**
   * One statement outside any transaction: on the shared lane when it writes, or when writes are
   * in flight there (so it runs after them, pipelined); otherwise a read takes any pooled
   * connection and runs beside the others.
   */
  private async outside(prepare: () => LaneSend | Promise<LaneSend>, options: { write: boolean; pool?: boolean }): Promise<pg.QueryResult> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        const lane = options.pool ? undefined : options.write || this.lane.busy ? this.lane : this.readLanes.pick();
        const result = lane ? await lane.submit(prepare) : await this.onPool(await prepare());
        this.connections.succeeded();
        return last(result);
      } catch (error) {
        const kind = failureKind(error);
        if (kind === 'statement' || error instanceof MagpieError) throw error instanceof MagpieError ? error : pgFailure(error, this.failureContext('statement'));
        this.connections.failed(error, { opening: false });
        // Not sent, or ended by the server before it completed (a terminated idle connection):
        // nothing of it ran, so another connection may run it. Every idle one may have been
        // ended at once, hence up to one try per pooled connection.
        if (neverRan(error) ? attempt < this.settings.maxConnections : attempt === 0 && !options.write && kind === 'connection') continue;
        // A write with no answer commits on its own (autocommit): it may have been applied.
        throw pgFailure(error, this.failureContext(options.write ? 'commit' : 'statement'));
      }
    }
  }

  private async onPool(send: LaneSend): Promise<pg.QueryResult | pg.QueryResult[]> {
    const client = await this.connections.checkout();
    try {
      const result = await send(client);
      client.release();
      return result;
    } catch (error) {
      this.connections.discard(client, failureKind(error) !== 'statement');
      throw error;
    }
  }

  private async savepoint<T>(outer: Frame, fn: () => Promise<T> | T): Promise<T> {
    const transaction = outer.transaction;
    const depth = outer.depth + 1;
    const name = `magpie_sp_${depth}`;
    const opener = transaction.openSavepoint(name);
    const frame: Frame = { transaction, depth, open: true, committed: outer.committed };
    try {
      const result = await this.context.run(frame, fn);
      frame.open = false;
      transaction.endSavepoint(opener, [`RELEASE SAVEPOINT ${name}`]);
      return result;
    } catch (error) {
      frame.open = false;
      transaction.endSavepoint(opener, [`ROLLBACK TO SAVEPOINT ${name}`, `RELEASE SAVEPOINT ${name}`]);
      throw error;
    }
  }

  private failureContext(during: 'statement' | 'commit' | 'connect') {
    return { during, deadlineMs: this.settings.queryTimeoutMs, schema: this.settings.schema };
  }
}

/** Named (parsed once per connection) only once its text is final: a name must keep one text. */
function statementQuery(prepared: PgPrepared, text: string, values: unknown[]): pg.QueryConfig {
  return prepared.text === undefined ? { text, values } : { text, values, name: prepared.name };
}


function shape(result: pg.QueryResult): PgResult {
  return { rows: result.rows as Array<Record<string, unknown>>, rowCount: result.rowCount ?? 0, fields: (result.fields ?? []).map((field) => field.name) };
}
