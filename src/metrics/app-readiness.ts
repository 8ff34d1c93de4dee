/** The parts of an open app the database readiness condition reads. */
interface DatabaseState {
  db: { open: boolean };
  /** Whether writes succeed (an unwritable or full data dir turns it false). */
  storage?: { healthy: boolean; problem?: { message: string } | undefined };
  /** A shared store's connection (PostgreSQL): the pool's state and the writer lock. */
  connection?: { health(): { state: string; lastError: string | undefined }; locksHeld(): boolean } | undefined;
}

/** `/readyz`'s database condition: open, and taking writes. Undefined when both hold. */
export function databaseProblem(app: DatabaseState): string | undefined {
  if (!app.db.open) return 'database closed';
  const connection = app.connection;
  if (connection) {
    const health = connection.health();
    if (health.state !== 'up') return `PostgreSQL ${health.state}${health.lastError ? `: ${health.lastError}` : ''}`;
  }
  // Before the lock: a writer lock another process took is a failure for good, not a reconnect.
  if (app.storage && !app.storage.healthy) return `storage failing: ${app.storage.problem?.message ?? 'writes fail'}`;
  if (connection && !connection.locksHeld()) return 'PostgreSQL writer lock not held (its connection is being reopened)';
  return undefined;
}

/** `/healthz`'s storage line: `sqlite writable`, `postgres up, writer lock held`, `postgres reconnecting (…)`. */
export function storageState(app: DatabaseState): string {
  if (!app.db.open) return 'closed';
  const failing = app.storage && !app.storage.healthy ? `, writes failing (${app.storage.problem?.message ?? 'unknown'})` : '';
  const connection = app.connection;
  if (!connection) return `sqlite ${failing ? failing.slice(2) : 'writable'}`;
  const health = connection.health();
  const state = health.state === 'up' ? 'up' : `${health.state} (${health.lastError ?? 'no answer'})`;
  return `postgres ${state}, writer lock ${connection.locksHeld() ? 'held' : 'not held'}${failing}`;
}
