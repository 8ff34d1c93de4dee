import { replaceClause, withClause, type TranslatedStatement } from './translate-sql.js';

/** Runs one catalog query on the connection the caller's context uses (a transaction's own, when inside one). */
export type CatalogQuery = (text: string, values: unknown[]) => Promise<Array<Record<string, unknown>>>;

/**
 * What only the server's catalog can say about a translated statement: the primary key an
 * `INSERT OR REPLACE` conflicts on, and the identity column whose value `lastInsertRowid`
 * reports (added as `RETURNING`). Answers are cached per table once the table exists; a table
 * not there yet (a statement prepared before its migration ran) is asked about again next time.
 */
export class PgCatalog {
  private readonly keys = new Map<string, string[]>();
  private readonly identities = new Map<string, string | null>();
  /** Questions in flight: statements prepared at once (a thousand channels' first writes) share one. */
  private readonly asking = new Map<string, Promise<unknown>>();

  async complete(statement: TranslatedStatement, query: CatalogQuery): Promise<{ text: string; final: boolean }> {
    let text = statement.text;
    let final = true;
    if (statement.replace) text = replaceClause(statement, await this.primaryKey(statement.replace.table, query));
    if (statement.insertInto && !statement.hasReturning) {
      const identity = await this.identityColumn(statement.insertInto, query);
      if (identity === undefined) final = false;
      else if (identity !== null) text = withClause(text, `RETURNING ${identity}`);
    }
    return { text, final };
  }

  private async primaryKey(table: string, query: CatalogQuery): Promise<string[]> {
    return this.keys.get(table) ?? this.shared(`key:${table}`, () => this.askPrimaryKey(table, query));
  }

  private async askPrimaryKey(table: string, query: CatalogQuery): Promise<string[]> {
    const rows = await query(
      `SELECT a.attname AS name FROM pg_index i
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)`,
      [table],
    );
    const key = rows.map((row) => String(row.name));
    if (key.length === 0) throw new Error(`table ${table} has no primary key for INSERT OR REPLACE`);
    this.keys.set(table, key);
    return key;
  }

  /** The identity column, null when the table has none, undefined when the table does not exist yet. */
  private async identityColumn(table: string, query: CatalogQuery): Promise<string | null | undefined> {
    if (this.identities.has(table)) return this.identities.get(table)!;
    return this.shared(`identity:${table}`, () => this.askIdentity(table, query));
  }

  /** The answer of the same question already in flight, or of this one. */
  private shared<T>(question: string, ask: () => Promise<T>): Promise<T> {
    let asking = this.asking.get(question) as Promise<T> | undefined;
    if (!asking) {
      asking = ask().finally(() => this.asking.delete(question));
      this.asking.set(question, asking);
    }
    return asking;
  }

  private async askIdentity(table: string, query: CatalogQuery): Promise<string | null | undefined> {
    // pg_attribute rather than information_schema.columns: the same answer, without the view's
    // privilege checks over every column of the database (tens of milliseconds a question).
    const rows = await query(
      `SELECT to_regclass($1) IS NOT NULL AS present,
              (SELECT a.attname FROM pg_attribute a
                 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
                  AND (a.attidentity <> '' OR pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%')
                ORDER BY a.attnum LIMIT 1) AS name`,
      [table],
    );
    const row = rows[0];
    if (!row || row.present !== true) return undefined;
    const name = row.name === null || row.name === undefined ? null : String(row.name);
    this.identities.set(table, name);
    return name;
  }
}
