import type pg from 'pg';
import { quote } from './copy-table.js';
import type { CopyPlan, TablePlan } from './table-plan.js';

/** The identity sequence behind a table's id column, as the server names it (schema-qualified, quoted). */
async function sequenceName(client: pg.ClientBase, table: TablePlan): Promise<string> {
  const result = await client.query<{ name: string | null }>('SELECT pg_get_serial_sequence($1, $2) AS name', [quote(table.name), table.identity]);
  const name = result.rows[0]?.name;
  if (!name) throw new Error(`no identity sequence behind ${table.name}.${table.identity}`);
  return name;
}

/**
 * Sets each identity sequence to the highest id copied, so the next row gets the next id:
 * never one a copied row has, nor one SQLite had handed out to a row deleted since.
 */
export async function setSequences(client: pg.ClientBase, plan: CopyPlan): Promise<void> {
  for (const table of plan.tables) {
    if (table.identity === undefined) continue;
    const highest = plan.highest.get(table.name) ?? 0n;
    const name = await sequenceName(client, table);
    if (highest > 0n) await client.query('SELECT setval($1::regclass, $2::bigint, true)', [name, highest.toString()]);
    else await client.query('SELECT setval($1::regclass, 1, false)', [name]);
  }
}

/** Where each sequence stands: its last value handed out, or 0 when none was. */
export async function sequencePositions(client: pg.ClientBase, plan: CopyPlan): Promise<Map<string, string>> {
  const positions = new Map<string, string>();
  for (const table of plan.tables) {
    if (table.identity === undefined) continue;
    const name = await sequenceName(client, table);
    const result = await client.query<{ last_value: string; is_called: boolean }>(`SELECT last_value::text AS last_value, is_called FROM ${name}`);
    const row = result.rows[0]!;
    positions.set(table.name, row.is_called ? row.last_value : '0');
  }
  return positions;
}
