/** The parts of an open app the database readiness condition reads. */
interface DatabaseState {
  db: { open: boolean };
  /** Whether writes succeed (an unwritable or full data dir turns it false). */
  storage?: { healthy: boolean; problem?: { message: string } | undefined };
}

/** `/readyz`'s database condition: open, and taking writes. Undefined when both hold. */
export function databaseProblem(app: DatabaseState): string | undefined {
  if (!app.db.open) return 'database closed';
  if (app.storage && !app.storage.healthy) return `storage failing: ${app.storage.problem?.message ?? 'writes fail'}`;
  return undefined;
}
