import type { SqlQuery, SqlRunResult } from '../sql-client.js';
import { bind } from './pg-params.js';
import type { TranslatedStatement } from './translate-sql.js';

/** One statement as the pool client runs it: translated once, completed from the catalog once. */
export interface PgPrepared {
  statement: TranslatedStatement;
  /** The server-side statement name (parsed once per connection). */
  name: string;
  /** Whether it may change data: writes keep the order they were issued in. */
  write: boolean;
  /** The final text, once the catalog has completed it. */
  text?: string;
}

export interface PgResult {
  rows: Array<Record<string, unknown>>;
  rowCount: number;
  fields: string[];
}

/** What a `PgPoolQuery` needs from its client. */
export interface PgRunner {
  execute(prepared: PgPrepared, values: unknown[]): Promise<PgResult>;
  /** The rows of `prepared` in batches, through a server-side cursor. */
  batches(prepared: PgPrepared, values: unknown[]): AsyncGenerator<PgResult>;
}

const READ_ONLY = /^\s*(SELECT|WITH|VALUES|TABLE|SHOW|EXPLAIN)\b/i;
const CHANGES_DATA = /\b(INSERT|UPDATE|DELETE|MERGE|nextval|setval|pg_advisory|pg_try_advisory|pg_notify|FOR\s+(UPDATE|SHARE|NO\s+KEY|KEY))\b/i;

/** A read runs beside other reads; anything that may change data (or take a lock) is a write. */
export function isWrite(text: string): boolean {
  return !READ_ONLY.test(text) || CHANGES_DATA.test(text);
}

export class PgPoolQuery implements SqlQuery {
  constructor(
    private readonly runner: PgRunner,
    private readonly prepared: PgPrepared,
    private readonly plucking: boolean,
  ) {}

  async run(...params: unknown[]): Promise<SqlRunResult> {
    const result = await this.runner.execute(this.prepared, bind(this.prepared.statement, params));
    // With the RETURNING the catalog added, the last row's first column is the new row's id.
    const first = result.fields[0];
    const last = result.rows[result.rows.length - 1];
    const id = first !== undefined && last !== undefined ? last[first] : undefined;
    return { changes: result.rowCount, lastInsertRowid: typeof id === 'number' ? id : 0 };
  }

  async get(...params: unknown[]): Promise<unknown> {
    const result = await this.runner.execute(this.prepared, bind(this.prepared.statement, params));
    const row = result.rows[0];
    if (row === undefined) return undefined;
    return this.plucking ? row[result.fields[0]!] : row;
  }

  async all(...params: unknown[]): Promise<unknown[]> {
    const result = await this.runner.execute(this.prepared, bind(this.prepared.statement, params));
    return this.plucking ? pluckRows(result) : result.rows;
  }

  runEach(paramLists: ReadonlyArray<readonly unknown[]>): Promise<SqlRunResult[]> {
    // Issued in one turn of the event loop: they leave in one write and run in this order.
    return Promise.all(paramLists.map((params) => this.run(...params)));
  }

  async *iterate(...params: unknown[]): AsyncIterableIterator<unknown> {
    const values = bind(this.prepared.statement, params);
    for await (const batch of this.runner.batches(this.prepared, values)) {
      yield* this.plucking ? pluckRows(batch) : batch.rows;
    }
  }

  pluck(toggle = true): SqlQuery {
    return new PgPoolQuery(this.runner, this.prepared, toggle);
  }
}

function pluckRows(result: PgResult): unknown[] {
  const field = result.fields[0];
  if (field === undefined) return result.rows.map(() => undefined);
  return result.rows.map((row) => row[field]);
}
