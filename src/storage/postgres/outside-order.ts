/**
 * Keeps statements issued outside a transaction in the order they were issued, as SQLite does by
 * running each inside the call, while reads still run side by side on the pool: a write starts
 * once every statement issued before it has settled, a read once every write issued before it
 * has. So `void insert.run(a); void insert.run(b)` lands a then b, and a read issued after a
 * write sees it. With nothing in flight a statement starts at once, inside the call.
 */
export class OutsideOrder {
  /** Settles once every write issued so far has. */
  private writeTail: Promise<void> = Promise.resolve();
  private writesInFlight = 0;
  private readonly readsInFlight = new Set<Promise<void>>();

  write<T>(work: () => Promise<T>): Promise<T> {
    const before = this.writesInFlight > 0 || this.readsInFlight.size > 0 ? Promise.all([this.writeTail, ...this.readsInFlight]) : undefined;
    const result = before ? before.then(work) : work();
    const settled = result.then(settle, settle);
    this.writeTail = settled;
    this.writesInFlight += 1;
    void settled.then(() => (this.writesInFlight -= 1));
    return result;
  }

  read<T>(work: () => Promise<T>): Promise<T> {
    const result = this.writesInFlight > 0 ? this.writeTail.then(work) : work();
    const settled = result.then(settle, settle);
    this.readsInFlight.add(settled);
    void settled.then(() => this.readsInFlight.delete(settled));
    return result;
  }

  /** Resolves once every write issued so far has settled (at once when none is in flight). */
  writesIssued(): Promise<void> | void {
    return this.writesInFlight > 0 ? this.writeTail : undefined;
  }
}

function settle(): void {}
