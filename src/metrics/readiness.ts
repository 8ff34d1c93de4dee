/**
 * What `/readyz` answers: ready only when every named condition holds. Each condition is a
 * function returning undefined when fine, or the reason it is not ("database not open yet",
 * "discord not connected"), so the 503 body says what to look at.
 */
export type ReadinessCheck = () => string | undefined;

export class Readiness {
  private readonly checks = new Map<string, ReadinessCheck>();
  private readonly states = new Map<string, () => string>();

  /**
   * Adds (or replaces) a line `/healthz` shows (`storage: reconnecting (ECONNREFUSED)`): a
   * part's state, whether or not it makes the process unready.
   */
  describe(name: string, state: () => string): void {
    this.states.set(name, state);
  }

  /** `name: state` for every described part, in the order they were added. */
  stateLines(): string[] {
    const lines: string[] = [];
    for (const [name, state] of this.states) {
      let text: string;
      try {
        text = state();
      } catch (error) {
        text = `unknown (${error instanceof Error ? error.message : String(error)})`;
      }
      lines.push(`${name}: ${text}`);
    }
    return lines;
  }

  /** Adds (or replaces) a named condition. */
  require(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  /** Every failing condition's reason, in the order they were added; empty = ready. */
  problems(): string[] {
    const problems: string[] = [];
    for (const [name, check] of this.checks) {
      let reason: string | undefined;
      try {
        reason = check();
      } catch (error) {
        reason = `${name} check failed: ${error instanceof Error ? error.message : String(error)}`;
      }
      if (reason !== undefined) problems.push(reason);
    }
    return problems;
  }
}
