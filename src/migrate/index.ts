/** Moving a deployment's data between stores: `magpie migrate --to postgres`. */
export { migrateToPostgres, type MigratedSource, type MigratePhase, type MigrateOptions, type MigrateResult } from './migrate-to-postgres.js';
export type { Verification } from './verify-copy.js';
