/**
 * A TCP proxy on 127.0.0.1 in front of PostgreSQL, for fault tests and benchmarks (src/ never
 * imports it). It delays every chunk by a fixed time per direction (so +5 ms is a 10 ms round
 * trip), can stop forwarding (a server that never answers) and start again, and can cut every
 * connection (or those whose startup packet names a given application). It reads the frontend
 * protocol from the client's side to count round trips: each simple query (`Q`) and each
 * extended-protocol `Sync` (`S`) after the startup packet asks for one answer. `exchanges`
 * counts the times the client spoke again after the server did: the round trips a pipelined
 * client actually waits for.
 */
import { createServer, Socket, type AddressInfo, type Server } from 'node:net';

export interface DelayProxyOptions {
  targetHost?: string;
  targetPort?: number;
  /** Added to every chunk in each direction (default 0). */
  delayMs?: number;
}

/** Codes of the untyped first packets: SSL and GSSAPI requests come before the real startup packet. */
const NEGOTIATION_CODES = new Set([80877103, 80877104]);

/** One direction of one connection: chunks leave in order, each no earlier than its due time. */
class DelayedPipe {
  private readonly queue: Array<{ due: number; chunk: Buffer }> = [];
  private timer: NodeJS.Timeout | undefined;
  stalled = false;

  constructor(
    private readonly proxy: TcpDelayProxy,
    private readonly to: Socket,
  ) {}

  push(chunk: Buffer): void {
    this.queue.push({ due: performance.now() + this.proxy.delayMs, chunk });
    this.pump();
  }

  pump(): void {
    if (this.timer || this.proxy.paused || this.stalled) return;
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const wait = head.due - performance.now();
      if (wait > 0.5) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, wait);
        return;
      }
      this.queue.shift();
      if (!this.to.destroyed) this.to.write(head.chunk);
    }
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }
}

/** The connection parameters of a startup packet (`user`, `database`, `application_name`, …). */
export type StartupParameters = Readonly<Record<string, string>>;

function startupParameters(packet: Buffer): StartupParameters {
  const fields = packet.subarray(8).toString('utf8').split('\0');
  const parameters: Record<string, string> = {};
  for (let index = 0; index + 1 < fields.length && fields[index] !== ''; index += 2) parameters[fields[index]!] = fields[index + 1]!;
  return parameters;
}

/**
 * Reads the client's side of the protocol: the startup packet's parameters, then counts Q and S
 * messages once the startup is over.
 */
class FrontendCounter {
  private buffer: Buffer = Buffer.alloc(0);
  private startup = true;
  serverSpoke = true;
  parameters: StartupParameters | undefined;

  constructor(
    private readonly proxy: TcpDelayProxy,
    private readonly onStartup: (parameters: StartupParameters) => void,
  ) {}

  feed(chunk: Buffer): void {
    if (this.serverSpoke && !this.startup) {
      this.proxy.exchangeCount += 1;
      this.serverSpoke = false;
    }
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      if (this.startup) {
        if (this.buffer.length < 8) return;
        const length = this.buffer.readInt32BE(0);
        if (this.buffer.length < length) return;
        const code = this.buffer.readInt32BE(4);
        const packet = this.buffer.subarray(0, length);
        this.buffer = this.buffer.subarray(length);
        if (!NEGOTIATION_CODES.has(code)) {
          this.startup = false;
          this.parameters = startupParameters(packet);
          this.onStartup(this.parameters);
        }
        continue;
      }
      if (this.buffer.length < 5) return;
      const length = this.buffer.readInt32BE(1);
      if (this.buffer.length < length + 1) return;
      const type = String.fromCharCode(this.buffer[0]!);
      if (type === 'Q' || type === 'S') this.proxy.roundTripCount += 1;
      this.buffer = this.buffer.subarray(length + 1);
    }
  }
}

interface Pair {
  client: Socket;
  server: Socket;
  pipes: DelayedPipe[];
  counter: FrontendCounter;
}

export class TcpDelayProxy {
  delayMs: number;
  paused = false;
  roundTripCount = 0;
  exchangeCount = 0;
  private readonly pairs = new Set<Pair>();
  private refusing: ((parameters: StartupParameters) => boolean) | undefined;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly target: { host: string; port: number },
    delayMs: number,
  ) {
    this.delayMs = delayMs;
    server.on('connection', (client) => this.accept(client));
  }

  static async start(options: DelayProxyOptions = {}): Promise<TcpDelayProxy> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    return new TcpDelayProxy(server, port, { host: options.targetHost ?? '127.0.0.1', port: options.targetPort ?? 5432 }, options.delayMs ?? 0);
  }

  /** `url` with its host and port replaced by the proxy's. */
  urlFor(url: string): string {
    const parsed = new URL(url);
    parsed.hostname = '127.0.0.1';
    parsed.port = String(this.port);
    return parsed.toString();
  }

  /** Connections open through the proxy now. */
  get connections(): number {
    return this.pairs.size;
  }

  /** Stops forwarding in both directions: statements sent meanwhile get no answer until `resume`. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    for (const pair of this.pairs) for (const pipe of pair.pipes) pipe.pump();
  }

  /**
   * Stops forwarding on the connections open now (or those whose startup parameters match), in
   * both directions, while new ones still work: the peer of a stalled connection does not know it
   * is gone (as after a silent network loss).
   */
  stallOpen(where?: (parameters: StartupParameters) => boolean): void {
    for (const pair of this.pairs) {
      if (where && !(pair.counter.parameters && where(pair.counter.parameters))) continue;
      for (const pipe of pair.pipes) pipe.stalled = true;
    }
  }

  /**
   * The local ports of the proxy's own connections to the server for the open connections whose
   * startup parameters match: `client_port` in the server's `pg_stat_activity`, which tells them
   * from other processes' connections of the same application name.
   */
  serverPorts(where: (parameters: StartupParameters) => boolean): number[] {
    const ports: number[] = [];
    for (const pair of this.pairs) {
      if (pair.counter.parameters && where(pair.counter.parameters) && pair.server.localPort !== undefined) ports.push(pair.server.localPort);
    }
    return ports;
  }

  /** Cuts every connection at once, as a crashed server or a dropped link would. */
  cutAll(): void {
    for (const pair of this.pairs) this.drop(pair);
  }

  /** Cuts the open connections whose startup parameters match; returns how many. */
  cut(where: (parameters: StartupParameters) => boolean): number {
    let cut = 0;
    for (const pair of this.pairs) {
      if (pair.counter.parameters && where(pair.counter.parameters)) {
        this.drop(pair);
        cut += 1;
      }
    }
    return cut;
  }

  /**
   * Until called again with undefined, a new connection whose startup parameters match is cut as
   * soon as it sends them (before the server sees it), as a link that keeps failing would.
   */
  refuse(where: ((parameters: StartupParameters) => boolean) | undefined): void {
    this.refusing = where;
  }

  async close(): Promise<void> {
    this.cutAll();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    client.setNoDelay(true);
    const server = new Socket();
    server.setNoDelay(true);
    const toServer = new DelayedPipe(this, server);
    const toClient = new DelayedPipe(this, client);
    let refused = false;
    const counter = new FrontendCounter(this, (parameters) => (refused = this.refusing?.(parameters) === true));
    const pair: Pair = { client, server, pipes: [toServer, toClient], counter };
    this.pairs.add(pair);
    client.on('data', (chunk: Buffer) => {
      counter.feed(chunk);
      if (refused) this.drop(pair);
      else toServer.push(chunk);
    });
    server.on('data', (chunk: Buffer) => {
      counter.serverSpoke = true;
      toClient.push(chunk);
    });
    const end = () => this.drop(pair);
    for (const socket of [client, server]) {
      socket.on('error', end);
      socket.on('close', end);
    }
    server.connect(this.target.port, this.target.host);
  }

  private drop(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    for (const pipe of pair.pipes) pipe.stop();
    pair.client.destroy();
    pair.server.destroy();
  }
}

/** What tests and benchmarks need of a proxy: a URL to connect to, its round-trip counts, and an end. */
export interface DelayedPostgres {
  url: string;
  proxy: TcpDelayProxy;
  roundTrips(): number;
  exchanges(): number;
  close(): Promise<void>;
}

/** Starts a proxy adding `delayMs` per direction in front of the server `databaseUrl` names. */
export async function startDelayedPostgres(databaseUrl: string, delayMs: number): Promise<DelayedPostgres> {
  const target = new URL(databaseUrl);
  const proxy = await TcpDelayProxy.start({ targetHost: target.hostname || '127.0.0.1', targetPort: Number(target.port || 5432), delayMs });
  return {
    url: proxy.urlFor(databaseUrl),
    proxy,
    roundTrips: () => proxy.roundTripCount,
    exchanges: () => proxy.exchangeCount,
    close: () => proxy.close(),
  };
}
