import type { SqlStatement as Statement } from '../storage/sql-database.js';
import type { SqlDatabase } from '../storage/database.js';

/**
 * Prepared statements by SQL text. Compiling a statement costs tens of microseconds, which adds
 * up on a search path that runs a dozen small queries; the cache is bounded because some SQL
 * varies with the number of placeholders.
 */
export class StatementCache {
  private readonly statements = new Map<string, Statement>();

  constructor(
    private readonly db: SqlDatabase,
    private readonly capacity = 256,
  ) {}

  get(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      if (this.statements.size >= this.capacity) this.statements.clear();
      statement = this.db.prepare(sql);
      this.statements.set(sql, statement);
    }
    return statement;
  }
}
