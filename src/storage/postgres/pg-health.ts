/**
 * What an operator (and `/readyz`, `/healthz`) needs to know about a PostgreSQL connection:
 * `up` while calls succeed; `reconnecting` after a connection was lost or a deadline passed,
 * until a call succeeds again; `down` while new connections cannot be opened at all.
 */
export type PgHealthState = 'up' | 'down' | 'reconnecting';

export interface PgHealth {
  state: PgHealthState;
  /** The newest connection-level failure (never a constraint violation or a bad statement), while not up. */
  lastError: string | undefined;
  lastErrorCode: string | undefined;
  /** Connection-level failures since the last success. */
  consecutiveFailures: number;
  /** When the state last changed (ms since the epoch). */
  since: number;
}

export class PgHealthTracker {
  private current: PgHealth;
  private readonly listeners = new Set<(health: PgHealth) => void>();

  constructor(private readonly now: () => number = Date.now) {
    this.current = { state: 'up', lastError: undefined, lastErrorCode: undefined, consecutiveFailures: 0, since: now() };
  }

  get snapshot(): PgHealth {
    return { ...this.current };
  }

  /** Returns a function that removes the listener. */
  onChange(listener: (health: PgHealth) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  success(): void {
    if (this.current.state === 'up' && this.current.consecutiveFailures === 0) return;
    this.set({ state: 'up', lastError: undefined, lastErrorCode: undefined, consecutiveFailures: 0 });
  }

  /** `opening`: a new connection could not be made (the server is down or unreachable). */
  failure(error: unknown, options: { opening: boolean }): void {
    const failure = error as { message?: unknown; code?: unknown };
    const cause = (error as { cause?: { code?: unknown } }).cause;
    const code = typeof failure?.code === 'string' ? failure.code : typeof cause?.code === 'string' ? cause.code : undefined;
    this.set({
      state: options.opening ? 'down' : this.current.state === 'down' ? 'down' : 'reconnecting',
      lastError: typeof failure?.message === 'string' ? failure.message : String(error),
      lastErrorCode: code,
      consecutiveFailures: this.current.consecutiveFailures + 1,
    });
  }

  private set(next: Omit<PgHealth, 'since'>): void {
    const changed = next.state !== this.current.state;
    this.current = { ...next, since: changed ? this.now() : this.current.since };
    if (!changed) return;
    for (const listener of this.listeners) {
      try {
        listener(this.snapshot);
      } catch {
        // A broken listener must not break the client.
      }
    }
  }
}
