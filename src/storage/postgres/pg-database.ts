import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { MagpieError } from '../../common/errors.js';
import type { SqlDatabase, SqlRunResult, SqlStatement, SqlTransaction } from '../sql-database.js';
import { THREAD_ENDED, type BridgeReply, type BridgeRequest, type BridgeSettings } from './bridge-protocol.js';
import { PgError, redactUrl } from './pg-error.js';
import { bind } from './pg-params.js';
import { replaceClause, translateStatement, withClause, type TranslatedStatement } from './translate-sql.js';

// Kept here for the modules that import them from this file.
export { PgError, redactUrl };

/** How long a caller waits for one statement before the connection counts as lost. */
const REPLY_TIMEOUT_MS = 120_000;

/**
 * PostgreSQL behind the synchronous `SqlDatabase` API. The connection lives in a thread of its
 * own; a statement is handed to it and the caller's thread sleeps (`Atomics.wait`) until the
 * reply is signalled. This keeps every store's contract: a database change and the in-memory
 * change that mirrors it happen with no await in between, exactly as on SQLite. The price is
 * that the event loop waits one round trip per statement, as it waits for the disk with SQLite;
 * group commit keeps that to a few statements per batch of messages.
 */
export class PgDatabase implements SqlDatabase {
  readonly dialect = 'postgres' as const;
  private readonly worker: Worker;
  private readonly port: MessagePort;
  private readonly signal: Int32Array;
  private readonly statements = new Map<string, PgStatement>();
  private readonly keys = new Map<string, string[]>();
  private readonly identities = new Map<string, string | null>();
  private pendingPrefix: string[] = [];
  /** Id of the newest request sent. */
  private lastId = 0;
  private depth = 0;
  private isOpen = true;

  constructor(readonly settings: BridgeSettings) {
    const flag = new SharedArrayBuffer(4);
    this.signal = new Int32Array(flag);
    const { port1, port2 } = new MessageChannel();
    this.port = port1;
    this.worker = new Worker(new URL('./bridge-worker.js', import.meta.url), {
      workerData: { port: port2, flag, settings },
      transferList: [port2],
    });
    this.worker.unref();
    this.port.unref();
    // Surfaces a refused connection now, with the address (never the password) in the message.
    try {
      this.request({ prefix: [], sql: 'SELECT 1', params: [] });
    } catch (error) {
      void this.worker.terminate();
      this.isOpen = false;
      throw new MagpieError('postgres_unreachable', `cannot use PostgreSQL at ${redactUrl(settings.url)}: ${(error as Error).message}`, {
        cause: error,
        context: { url: redactUrl(settings.url), schema: settings.schema },
        hint: 'check [storage] url_env (default MAGPIE_DATABASE_URL) and that the server accepts connections from here',
      });
    }
  }

  get open(): boolean {
    return this.isOpen;
  }

  get inTransaction(): boolean {
    return this.depth > 0;
  }

  prepare(sql: string): SqlStatement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = new PgStatement(this, this.complete(translateStatement(sql)), `m${this.statements.size + 1}`);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  exec(sql: string): this {
    this.request({ prefix: this.takePrefix(), sql, params: [], simple: true });
    return this;
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  transaction<F extends (...args: any[]) => any>(fn: F): SqlTransaction<F> {
    const run = (...args: Parameters<F>): ReturnType<F> => {
      const level = this.depth;
      // BEGIN (or the savepoint) travels with the transaction's first statement: no round trip of its own.
      this.pendingPrefix.push(level === 0 ? 'BEGIN' : `SAVEPOINT magpie_${level}`);
      this.depth += 1;
      let result: ReturnType<F>;
      try {
        result = fn(...args);
      } catch (error) {
        this.depth = level;
        try {
          this.finish(level, 'rollback');
        } catch {
          // The connection failed under the transaction: the server rolls it back itself.
        }
        throw error;
      }
      this.depth = level;
      this.finish(level, 'commit');
      return result;
    };
    const wrapped = run as unknown as SqlTransaction<F>;
    Object.assign(wrapped, { deferred: run, immediate: run, exclusive: run });
    return wrapped;
  }

  pragma(): never {
    throw new Error('PRAGMA is SQLite only');
  }

  close(): void {
    if (!this.isOpen) return;
    this.isOpen = false;
    try {
      this.request({ prefix: [], sql: '', params: [], close: true });
    } catch {
      // The connection is gone already: nothing is left to close.
    }
    void this.worker.terminate();
  }

  /** Runs one translated statement; used by `PgStatement`. */
  execute(text: string, params: unknown[], name: string | undefined): { rows: Array<Record<string, unknown>>; rowCount: number; fields: string[] } {
    return this.request({ prefix: this.takePrefix(), sql: text, params, ...(name ? { name } : {}) });
  }

  /**
   * Ends the transaction (or savepoint) opened at `level`. When its opener is still waiting to be
   * sent, nothing of it reached the server: there is nothing to commit or roll back.
   */
  private finish(level: number, outcome: 'commit' | 'rollback'): void {
    const opener = level === 0 ? 'BEGIN' : `SAVEPOINT magpie_${level}`;
    const waiting = this.pendingPrefix.indexOf(opener);
    if (waiting >= 0) {
      this.pendingPrefix = this.pendingPrefix.slice(0, waiting);
      return;
    }
    const statement =
      outcome === 'commit'
        ? level === 0
          ? 'COMMIT'
          : `RELEASE SAVEPOINT magpie_${level}`
        : level === 0
          ? 'ROLLBACK'
          : `ROLLBACK TO SAVEPOINT magpie_${level}; RELEASE SAVEPOINT magpie_${level}`;
    this.request({ prefix: this.takePrefix(), sql: statement, params: [], simple: true });
  }

  private takePrefix(): string[] {
    const prefix = this.pendingPrefix;
    this.pendingPrefix = [];
    return prefix;
  }

  /** Sends one request and sleeps until its reply arrives. */
  private request(request: Omit<BridgeRequest, 'id'>): { rows: Array<Record<string, unknown>>; rowCount: number; fields: string[] } {
    if (!this.isOpen && !request.close) throw new Error('the PostgreSQL connection is closed');
    this.lastId = this.lastId >= 0x7ffffff0 ? 1 : this.lastId + 1;
    const id = this.lastId;
    this.port.postMessage({ ...request, id });
    // Sleeps until the flag holds this request's id (or says the thread ended); any other value
    // is a late wake-up for an earlier request.
    const deadline = performance.now() + REPLY_TIMEOUT_MS;
    let seen = Atomics.load(this.signal, 0);
    while (seen !== id && seen !== THREAD_ENDED) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      Atomics.wait(this.signal, 0, seen, left);
      seen = Atomics.load(this.signal, 0);
    }
    let message = receiveMessageOnPort(this.port);
    // A reply to a request given up on (timed out) is skipped, never taken for this one.
    while (message && (message.message as BridgeReply).id !== id) message = receiveMessageOnPort(this.port);
    if (!message && seen === THREAD_ENDED) {
      this.isOpen = false;
      throw new MagpieError('postgres_connection_lost', 'the PostgreSQL connection thread ended', {
        hint: 'restart Magpie; nothing half-applied stays in the database (the server rolled back the open transaction)',
      });
    }
    if (!message) {
      throw new MagpieError('postgres_timeout', `PostgreSQL did not answer within ${REPLY_TIMEOUT_MS / 1000} s`, {
        hint: 'check the server and the network; Magpie retries the write when the store is back',
      });
    }
    const reply = message.message as BridgeReply;
    if (!reply.ok) throw new PgError(reply.error.message, reply.error.code, reply.error.constraint);
    // Binary columns come back as Buffers, as better-sqlite3 returns BLOBs.
    for (const column of reply.binary ?? []) {
      for (const row of reply.rows) {
        const bytes = row[column];
        if (bytes instanceof Uint8Array) row[column] = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      }
    }
    return reply;
  }

  /** Adds what only the server's catalog can say: primary keys for REPLACE, the id column for lastInsertRowid. */
  private complete(statement: TranslatedStatement): TranslatedStatement {
    let text = statement.text;
    if (statement.replace) text = replaceClause(statement, this.primaryKey(statement.replace.table));
    if (statement.insertInto && !statement.hasReturning) {
      const identity = this.identityColumn(statement.insertInto);
      if (identity) text = withClause(text, `RETURNING ${identity}`);
    }
    return { ...statement, text };
  }

  private primaryKey(table: string): string[] {
    let key = this.keys.get(table);
    if (!key) {
      const rows = this.request({
        prefix: [],
        sql: `SELECT a.attname AS name FROM pg_index i
                JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
               WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
        params: [table],
      }).rows;
      key = rows.map((row) => String(row.name));
      if (key.length === 0) throw new Error(`table ${table} has no primary key for INSERT OR REPLACE`);
      this.keys.set(table, key);
    }
    return key;
  }

  private identityColumn(table: string): string | null {
    if (!this.identities.has(table)) {
      const rows = this.request({
        prefix: [],
        sql: `SELECT column_name AS name FROM information_schema.columns
               WHERE table_schema = current_schema() AND table_name = $1
                 AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')
               ORDER BY ordinal_position LIMIT 1`,
        params: [table],
      }).rows;
      this.identities.set(table, rows[0] ? String(rows[0].name) : null);
    }
    return this.identities.get(table)!;
  }
}

class PgStatement implements SqlStatement {
  private plucking = false;

  constructor(
    private readonly db: PgDatabase,
    private readonly statement: TranslatedStatement,
    private readonly name: string,
  ) {}

  run(...params: unknown[]): SqlRunResult {
    const result = this.execute(params);
    const first = result.fields[0];
    const last = result.rows[result.rows.length - 1];
    const id = first !== undefined && last !== undefined ? last[first] : undefined;
    return { changes: result.rowCount, lastInsertRowid: typeof id === 'number' ? id : 0 };
  }

  get(...params: unknown[]): unknown {
    const result = this.execute(params);
    const row = result.rows[0];
    if (row === undefined) return undefined;
    return this.plucking ? row[result.fields[0]!] : row;
  }

  all(...params: unknown[]): unknown[] {
    const result = this.execute(params);
    if (!this.plucking) return result.rows;
    const field = result.fields[0]!;
    return result.rows.map((row) => row[field]);
  }

  iterate(...params: unknown[]): IterableIterator<unknown> {
    return this.all(...params)[Symbol.iterator]();
  }

  pluck(toggle = true): SqlStatement {
    const copy = new PgStatement(this.db, this.statement, this.name);
    copy.plucking = toggle;
    return copy;
  }

  private execute(params: unknown[]): { rows: Array<Record<string, unknown>>; rowCount: number; fields: string[] } {
    return this.db.execute(this.statement.text, bind(this.statement, params), this.name);
  }
}
