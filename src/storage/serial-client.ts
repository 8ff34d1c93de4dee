import { AsyncLocalStorage } from 'node:async_hooks';
import { COMMIT_UNKNOWN, runCommitted, type ScriptStep, type SqlClient, type SqlDialect, type SqlQuery, type SqlRunResult, type TransactionMode } from './sql-client.js';
import type { SqlDatabase, SqlStatement } from './sql-database.js';
import type { WriterThread } from './writer-thread.js';

/** One open transaction (or savepoint) of a `SerialClient`, as the async context inside it sees it. */
interface OpenTransaction {
  root: OpenTransaction | undefined;
  depth: number;
  open: boolean;
  /** On the outermost frame: what runs once it committed. */
  committed?: Array<() => void>;
  /** The file held for the writer thread's transaction (nothing runs on this connection for it). */
  offThread?: boolean;
}

/** How many rows `iterate` hands out per step. */
const ITERATE_BATCH = 500;

/**
 * Who holds a database file now, shared by every client of this process on that file: SQLite
 * lets one writer in at a time and its busy wait blocks the thread, so a second connection that
 * wrote while another's transaction is open across an await would wait on a lock that cannot be
 * released. With one gate per file, its statements queue instead.
 */
interface Gate {
  /** The outermost frame of the transaction holding the file. */
  holder: OpenTransaction | undefined;
  /** Work waiting for the file while a transaction holds it, in arrival order. */
  readonly waiting: Array<() => void>;
  clients: number;
}

const gates = new Map<string, Gate>();

function gateFor(file: string | undefined): Gate {
  const fresh: Gate = { holder: undefined, waiting: [], clients: 1 };
  // An in-memory database (or a connection without a file) is its own.
  if (!file || file === ':memory:') return fresh;
  const shared = gates.get(file);
  if (shared) {
    shared.clients += 1;
    return shared;
  }
  gates.set(file, fresh);
  return fresh;
}

/**
 * `SqlClient` over one synchronous connection (better-sqlite3). A statement runs inside the
 * call, so its promise is already settled when it is returned and calls made without an await
 * between them still run in the order they were made. A transaction holds the connection from
 * BEGIN to COMMIT across its awaits: statements from outside its async context queue behind it
 * and run, in order, once it ends. With no transaction open nothing queues, so SQLite pays one
 * settled promise per statement and nothing more.
 */
export class SerialClient implements SqlClient {
  private readonly context = new AsyncLocalStorage<OpenTransaction>();
  private readonly queries = new Map<string, SerialQuery>();
  private readonly gate: Gate;
  private readonly file: string | undefined;
  private writer: WriterThread | undefined;

  constructor(
    /** The connection underneath; exposed for SQLite-only work (backup, checkpoints). */
    readonly connection: SqlDatabase,
    readonly dialect: SqlDialect = connection.dialect ?? 'sqlite',
  ) {
    const name = (connection as { name?: unknown }).name;
    this.file = dialect === 'sqlite' && typeof name === 'string' ? name : undefined;
    this.gate = gateFor(this.file);
  }

  private get holder(): OpenTransaction | undefined {
    return this.gate.holder;
  }

  private set holder(frame: OpenTransaction | undefined) {
    this.gate.holder = frame;
  }

  private get waiting(): Array<() => void> {
    return this.gate.waiting;
  }

  get open(): boolean {
    return this.connection.open;
  }

  /** One connection: transactions take turns. */
  readonly transactionSlots = 1;

  get inTransaction(): boolean {
    return this.inside(this.context.getStore());
  }

  /**
   * Gives the client a writer thread on its file, for `scriptOffThread`; the client closes it.
   * Only for a file-backed database that this process writes.
   */
  useWriterThread(writer: WriterThread): void {
    this.writer = writer;
  }

  /** Closes the writer thread (after every script already sent to it); scripts are refused from then on. */
  async stopWriterThread(): Promise<void> {
    const writer = this.writer;
    this.writer = undefined;
    await writer?.close();
  }

  prepare(sql: string): SqlQuery {
    let query = this.queries.get(sql);
    if (!query) {
      query = new SerialQuery(this, sql, false);
      this.queries.set(sql, query);
    }
    return query;
  }

  exec(sql: string): Promise<void> {
    return this.use(() => {
      this.connection.exec(sql);
    });
  }

  pragma(source: string, options?: { simple?: boolean }): Promise<unknown> {
    return this.use(() => this.connection.pragma(source, options));
  }

  async transaction<T>(fn: () => Promise<T> | T, mode: TransactionMode = 'deferred'): Promise<T> {
    const outer = this.context.getStore();
    if (this.inside(outer)) return this.savepoint(outer!, fn);
    const frame: OpenTransaction = { root: undefined, depth: 0, open: true };
    frame.root = frame;
    const turn = this.take(frame);
    if (turn) await turn;
    try {
      this.connection.exec(mode === 'deferred' ? 'BEGIN' : 'BEGIN IMMEDIATE');
      let result: T;
      try {
        result = await this.context.run(frame, fn);
      } catch (error) {
        frame.open = false;
        this.rollback();
        throw error;
      }
      frame.open = false;
      try {
        this.connection.exec('COMMIT');
      } catch (error) {
        this.rollback();
        throw error;
      }
      runCommitted(frame.committed);
      return result;
    } finally {
      frame.open = false;
      this.holder = undefined;
      this.drain();
    }
  }

  /**
   * Runs `steps` as one transaction on the writer thread, in one message each way: a group
   * commit's inserts, FTS5's flush and its COMMIT cost the thread's core, and the event loop
   * only sends the rows and hears the outcome. The file is held meanwhile as for a transaction
   * of this connection, except that reads from outside go on (they see what was committed
   * before). `build` makes the steps once the thread is sure to take them. Resolves true once
   * committed; false when there is no usable thread (or the caller is inside a transaction),
   * and the caller writes here instead. A thread that went away before answering rejects with
   * `storage_commit_unknown`: it may have committed.
   */
  async scriptOffThread(build: () => ScriptStep[]): Promise<boolean> {
    const writer = this.writer;
    if (!writer?.usable || this.inside(this.context.getStore())) return false;
    const frame: OpenTransaction = { root: undefined, depth: 0, open: true, offThread: true };
    frame.root = frame;
    const turn = this.take(frame);
    if (turn) await turn;
    try {
      // It failed while this script waited for the file: nothing was sent.
      if (!writer.usable) return false;
      await writer.script(build());
      return true;
    } catch (error) {
      if (writer.usable) throw error;
      throw Object.assign(new Error(`the writer thread stopped before answering: ${(error as Error).message}`), { code: COMMIT_UNKNOWN, cause: error });
    } finally {
      frame.open = false;
      this.holder = undefined;
      this.drain();
    }
  }

  afterCommit(callback: () => void): void {
    const frame = this.context.getStore();
    if (!this.inside(frame)) {
      callback();
      return;
    }
    (frame!.root!.committed ??= []).push(callback);
  }

  async close(): Promise<void> {
    if (!this.connection.open) return;
    await this.stopWriterThread();
    this.connection.close();
    // An AsyncLocalStorage that ran once stays on Node's list until disabled: every promise any
    // code makes afterwards pays for it, so a process that opens many clients slows down.
    this.context.disable();
    this.gate.clients -= 1;
    if (this.gate.clients === 0 && this.file !== undefined && gates.get(this.file) === this.gate) gates.delete(this.file);
  }

  /**
   * Runs `work` now, or after the transaction that holds the connection when the caller is outside
   * it. A read (`reads` says whether it is one) goes on at once while the writer thread holds the
   * file: that transaction is on another connection, so this one has nothing uncommitted to show.
   */
  use<T>(work: () => T, reads?: () => boolean): Promise<T> {
    if (
      this.inside(this.context.getStore()) ||
      (this.holder === undefined && this.waiting.length === 0) ||
      (this.holder?.offThread === true && reads?.() === true)
    ) {
      try {
        return Promise.resolve(work());
      } catch (error) {
        return Promise.reject(error);
      }
    }
    return new Promise<T>((resolve, reject) => {
      this.waiting.push(() => {
        try {
          resolve(work());
        } catch (error) {
          reject(error);
        }
      });
    });
  }

  /** Prepares one statement on the connection (used by `SerialQuery`). */
  statement(sql: string): SqlStatement {
    return this.connection.prepare(sql);
  }

  /**
   * Makes `frame` the file's holder: now when it is free (undefined: no turn of the microtask
   * queue is spent), or when its turn comes, in arrival order (the promise to await).
   */
  private take(frame: OpenTransaction): Promise<void> | undefined {
    if (this.holder === undefined && this.waiting.length === 0) {
      this.holder = frame;
      return undefined;
    }
    // Taken synchronously when our turn comes, so nothing queued after us runs first.
    return new Promise<void>((resolve) => this.waiting.push(() => ((this.holder = frame), resolve())));
  }

  private inside(frame: OpenTransaction | undefined): boolean {
    return frame !== undefined && frame.open && frame.root !== undefined && frame.root === this.holder;
  }

  private async savepoint<T>(outer: OpenTransaction, fn: () => Promise<T> | T): Promise<T> {
    const depth = outer.depth + 1;
    const name = `magpie_sp_${depth}`;
    const frame: OpenTransaction = { root: outer.root, depth, open: true };
    this.connection.exec(`SAVEPOINT ${name}`);
    try {
      const result = await this.context.run(frame, fn);
      frame.open = false;
      this.connection.exec(`RELEASE SAVEPOINT ${name}`);
      return result;
    } catch (error) {
      frame.open = false;
      try {
        this.connection.exec(`ROLLBACK TO SAVEPOINT ${name}; RELEASE SAVEPOINT ${name}`);
      } catch {
        // The outer transaction is gone with the connection's error; its owner rolls back.
      }
      throw error;
    }
  }

  private rollback(): void {
    try {
      if (this.connection.inTransaction || this.connection.dialect === 'postgres') this.connection.exec('ROLLBACK');
    } catch {
      // Nothing to roll back (SQLite already did, on the error that got us here).
    }
  }

  /** Hands the free connection to queued work, in order, until a queued transaction takes it. */
  private drain(): void {
    while (this.holder === undefined && this.waiting.length > 0) this.waiting.shift()!();
  }
}

class SerialQuery implements SqlQuery {
  private prepared: SqlStatement | undefined;

  constructor(
    private readonly client: SerialClient,
    private readonly sql: string,
    private readonly plucking: boolean,
  ) {}

  run(...params: unknown[]): Promise<SqlRunResult> {
    return this.client.use(() => this.statement().run(...params), this.reads);
  }

  get(...params: unknown[]): Promise<unknown> {
    return this.client.use(() => this.statement().get(...params), this.reads);
  }

  all(...params: unknown[]): Promise<unknown[]> {
    return this.client.use(() => this.statement().all(...params), this.reads);
  }

  runEach(paramLists: ReadonlyArray<readonly unknown[]>): Promise<SqlRunResult[]> {
    return this.client.use(() => {
      const statement = this.statement();
      return paramLists.map((params) => statement.run(...params));
    });
  }

  async *iterate(...params: unknown[]): AsyncIterableIterator<unknown> {
    // Keyset paging is the store's business; here the rows come in fixed-size slices of one read.
    const rows = await this.all(...params);
    for (let start = 0; start < rows.length; start += ITERATE_BATCH) {
      for (const row of rows.slice(start, start + ITERATE_BATCH)) yield row;
    }
  }

  pluck(toggle = true): SqlQuery {
    return new SerialQuery(this.client, this.sql, toggle);
  }

  /** Whether the statement only reads (SQLite knows once it is prepared). */
  private readonly reads = (): boolean => (this.statement() as SqlStatement & { readonly?: boolean }).readonly === true;

  private statement(): SqlStatement {
    if (!this.prepared) {
      const base = this.client.statement(this.sql);
      this.prepared = this.plucking ? base.pluck(true) : base;
    }
    return this.prepared;
  }
}

