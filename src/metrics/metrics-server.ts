import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MagpieError } from '../common/errors.js';
import { splitListen } from '../config/validate-values.js';
import type { MagpieMetrics } from './magpie-metrics.js';
import type { Readiness } from './readiness.js';

export interface MetricsServerOptions {
  /** `host:port` as validated by `[metrics] listen`; port 0 picks a free port. */
  listen: string;
  metrics: MagpieMetrics;
  readiness: Readiness;
}

export interface MetricsServer {
  /** The address really bound, `host:port` (the port filled in when 0 was asked). */
  readonly address: string;
  close(): Promise<void>;
}

/**
 * The operator's endpoint: `GET /metrics` (Prometheus text), `GET /healthz` (200 while the
 * process runs: the event loop answers; the body names each part's state, such as storage) and `GET /readyz` (200 when every readiness condition
 * holds, else 503 with the reasons, one a line). Nothing else; no request body is read.
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const server = createServer((request, response) => void handle(request, response, options));
  // A scraper that keeps its connection open must not hold shutdown up.
  server.keepAliveTimeout = 5_000;
  const { host, port } = splitListen(options.listen);
  await new Promise<void>((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      reject(
        new MagpieError('metrics_listen_failed', `cannot serve metrics on ${options.listen}: ${error.code ?? error.message}`, {
          cause: error,
          context: { key: 'metrics.listen', listen: options.listen },
          hint:
            error.code === 'EADDRINUSE'
              ? 'another process holds that port: set [metrics] listen to a free "host:port", or "" to turn metrics off'
              : 'set [metrics] listen to an address of this machine, such as "127.0.0.1:9464", or "" to turn metrics off',
        }),
      );
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const address = `${bound.family === 'IPv6' ? `[${bound.address}]` : bound.address}:${bound.port}`;
  return { address, close: () => closeServer(server) };
}

async function handle(request: IncomingMessage, response: ServerResponse, options: MetricsServerOptions): Promise<void> {
  const path = (request.url ?? '/').split('?')[0];
  const send = (status: number, body: string, contentType = 'text/plain; charset=utf-8'): void => {
    response.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
    response.end(request.method === 'HEAD' ? undefined : body);
  };
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.setHeader('allow', 'GET, HEAD');
    return send(405, 'only GET and HEAD\n');
  }
  try {
    switch (path) {
      case '/metrics':
        return send(200, await options.metrics.text(), options.metrics.contentType);
      case '/healthz':
        // Alive while the loop answers; the parts' states ride along for whoever looks.
        return send(200, ['ok', ...options.readiness.stateLines()].join('\n') + '\n');
      case '/readyz': {
        const problems = options.readiness.problems();
        return problems.length === 0 ? send(200, 'ready\n') : send(503, `not ready: ${problems.join('; ')}\n`);
      }
      default:
        return send(404, 'not found: try /metrics, /healthz or /readyz\n');
    }
  } catch (error) {
    send(500, `metrics failed: ${error instanceof Error ? error.message : String(error)}\n`);
  }
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
