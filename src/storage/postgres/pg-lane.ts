import type pg from 'pg';
import type { PgConnections } from './pg-connections.js';
import { failureKind } from './pg-error.js';

/** Sends one statement on the lane's connection; called at the moment it is its turn. */
export type LaneSend = (client: pg.PoolClient) => Promise<pg.QueryResult | pg.QueryResult[]>;

interface LaneEntry {
  send: LaneSend | undefined;
  failed: unknown;
  resolve(result: pg.QueryResult | pg.QueryResult[]): void;
  reject(error: unknown): void;
}

/**
 * The connection that statements outside a transaction share, pipelined: each is sent the moment
 * its turn comes, without waiting for the answers to the ones before it, and the server runs
 * them in the order they were issued. So writes keep their order and a read queued behind them
 * sees them, as on SQLite, while a burst of statements costs one round trip, not one each.
 * A statement whose text is not ready yet (its first run asks the catalog) holds its place.
 * When the connection fails at the connection level it is destroyed and the next statement
 * opens another (the caller decides what to retry).
 */
export class PgLane {
  private client: pg.PoolClient | undefined;
  private opening = false;
  private readonly queue: LaneEntry[] = [];
  private inFlight = 0;
  private pumpScheduled = false;
  /** Settles once everything submitted so far has (answers come back in order). */
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly connections: PgConnections) {}

  /** True while statements are queued or unanswered on the lane. */
  get busy(): boolean {
    return this.inFlight > 0;
  }

  /** Statements queued or unanswered on the lane. */
  get pending(): number {
    return this.inFlight;
  }

  /** Resolves once every statement submitted so far has settled (at once when none is in flight). */
  settled(): Promise<void> | undefined {
    return this.inFlight > 0 ? this.tail : undefined;
  }

  /** Queues one statement; `prepare` gives its sender now, or a promise of it (its place is kept). */
  submit(prepare: () => LaneSend | Promise<LaneSend>): Promise<pg.QueryResult | pg.QueryResult[]> {
    this.inFlight += 1;
    const result = new Promise<pg.QueryResult | pg.QueryResult[]>((resolve, reject) => {
      const entry: LaneEntry = { send: undefined, failed: undefined, resolve, reject };
      this.queue.push(entry);
      try {
        const ready = prepare();
        if (typeof ready === 'function') entry.send = ready;
        else {
          ready.then(
            (send) => ((entry.send = send), this.pump()),
            (error) => ((entry.failed = error ?? new Error('statement preparation failed')), this.pump()),
          );
        }
      } catch (error) {
        entry.failed = error ?? new Error('statement preparation failed');
      }
    });
    const settled = result.then(ignore, ignore);
    this.tail = settled;
    void settled.then(() => (this.inFlight -= 1));
    this.pump();
    return result;
  }

  /** Gives the connection back to the pool (closing). */
  release(): void {
    const client = this.client;
    this.client = undefined;
    client?.release();
  }

  /**
   * Sends at the end of this turn of the event loop, so that every statement submitted in it
   * leaves in one socket write (one system call, one packet) instead of one write each.
   */
  private pump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      const stream = (this.client as unknown as { connection?: { stream?: { cork?(): void; uncork?(): void } } } | undefined)?.connection?.stream;
      stream?.cork?.();
      try {
        this.send();
      } finally {
        stream?.uncork?.();
      }
    });
  }

  /** Sends every ready statement at the head of the queue, in order. */
  private send(): void {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.failed !== undefined) {
        this.queue.shift();
        head.reject(head.failed);
        continue;
      }
      if (!head.send) return;
      const client = this.client;
      if (!client) {
        this.open();
        return;
      }
      this.queue.shift();
      head.send(client).then(head.resolve, (error) => {
        if (failureKind(error) !== 'statement') this.drop(client);
        head.reject(error);
      });
    }
  }

  private open(): void {
    if (this.opening) return;
    this.opening = true;
    this.connections.checkout().then(
      (client) => {
        this.opening = false;
        this.client = client;
        this.pump();
      },
      (error) => {
        this.opening = false;
        // Nobody can be served without a connection: everything queued fails (the caller retries).
        for (const entry of this.queue.splice(0)) entry.reject(error);
      },
    );
  }

  private drop(client: pg.PoolClient): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.connections.discard(client, true);
  }
}

/** Read lanes at most: the rest of the pool is for transactions and cursors. */
const MAX_READ_LANES = 4;
/** Reads sent together on one lane before the next lane takes over (within one turn of the loop). */
const READS_PER_WRITE = 32;

/**
 * Pipelined lanes for reads while no write is in flight: one per two pooled connections beyond
 * the write lane's and one spare, at most four (none on a pool too small to spare them).
 */
export class ReadLanes {
  private readonly lanes: PgLane[];
  private turnLane: PgLane | undefined;
  private turnReads = 0;

  constructor(connections: PgConnections, maxConnections: number) {
    const count = Math.max(0, Math.min(MAX_READ_LANES, Math.floor((maxConnections - 2) / 2)));
    this.lanes = Array.from({ length: count }, () => new PgLane(connections));
  }

  /** Connections these lanes hold at most. */
  get size(): number {
    return this.lanes.length;
  }

  /**
   * The read lane for this turn of the event loop: the least busy one, kept for up to
   * `READS_PER_WRITE` reads, so that reads issued together (a channel's load: history,
   * summaries, counters...) leave in one socket write and come back as one round trip, while a
   * burst of a thousand channel loads still spreads over every lane (one server process each).
   * Undefined when there are none.
   */
  pick(): PgLane | undefined {
    if (this.turnLane && this.turnReads < READS_PER_WRITE) {
      this.turnReads += 1;
      return this.turnLane;
    }
    let best: PgLane | undefined;
    for (const lane of this.lanes) {
      if (lane !== this.turnLane && (!best || lane.pending < best.pending)) best = lane;
    }
    best ??= this.turnLane;
    if (best) {
      if (!this.turnLane) setImmediate(() => (this.turnLane = undefined));
      this.turnLane = best;
      this.turnReads = 1;
    }
    return best;
  }

  release(): void {
    for (const lane of this.lanes) lane.release();
  }
}

function ignore(): void {}
