import { MagpieError } from '../../common/errors.js';
import { refuseNewerSteps, runPendingSteps, type Migration, type SchemaStepListener } from '../database.js';
import type { SqlClient } from '../sql-client.js';

/**
 * How long one schema step may take. A step may rewrite or index a whole table (a generated
 * column, a GIN index over every memory): on a large store that takes minutes, far past the
 * few seconds a statement is given while serving. It is also how long a process waits for
 * another that is applying the same step. A server that stops answering still ends the start
 * (which `magpie start` retries), only later.
 */
export const SCHEMA_STEP_DEADLINE_MS = 30 * 60_000;

/**
 * Applies the PostgreSQL form of every migration not yet applied, each in its own transaction
 * under a transaction-level advisory lock: processes starting together against a fresh schema
 * take turns instead of racing on "relation already exists".
 */
export async function applyPgMigrations(db: SqlClient, migrations: readonly Migration[], onSchemaStep?: SchemaStepListener): Promise<void> {
  const missingForm = migrations.filter((migration) => migration.postgres === undefined);
  if (missingForm.length > 0) {
    throw new MagpieError('postgres_migration_missing', `no PostgreSQL form for schema steps ${missingForm.map((step) => step.name).join(', ')}`, {
      hint: 'use [storage] backend = "sqlite" with this build',
    });
  }
  await db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)');
  const applied = new Set(((await db.prepare('SELECT name FROM schema_migrations').all()) as { name: string }[]).map((row) => row.name));
  refuseNewerSteps(applied, migrations, 'this PostgreSQL schema');
  const isApplied = db.prepare('SELECT 1 AS applied FROM schema_migrations WHERE name = ?');
  const record = db.prepare('INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)');
  const lock = db.prepare(`SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':magpie-migrations', 0)) AS locked`);
  const pending = migrations.filter((migration) => !applied.has(migration.name));
  const applyStep = (migration: Migration) =>
    db.transaction(
      async () => {
        await lock.get();
        if (await isApplied.get(migration.name)) return;
        // The step's own locks wait no longer than a served statement's would: an ALTER queued
        // behind a running bot's transaction would hold up every statement queued behind it.
        await db.exec('SET LOCAL lock_timeout TO DEFAULT');
        await db.exec(migration.postgres!);
        await migration.postgresData?.(db);
        await record.run(migration.name, Date.now());
      },
      'deferred',
      { deadlineMs: SCHEMA_STEP_DEADLINE_MS },
    );
  await runPendingSteps(pending, applyStep, onSchemaStep);
}

/** Whether every migration is applied (readers refuse a schema an older Magpie wrote). */
export async function missingPgMigrations(db: SqlClient, migrations: readonly Migration[]): Promise<string[]> {
  const exists = (await db.prepare(`SELECT to_regclass('schema_migrations') IS NOT NULL AS present`).get()) as { present: boolean };
  if (!exists.present) return migrations.map((migration) => migration.name);
  const applied = new Set(((await db.prepare('SELECT name FROM schema_migrations').all()) as { name: string }[]).map((row) => row.name));
  return migrations.filter((migration) => !applied.has(migration.name)).map((migration) => migration.name);
}
