import { MagpieError } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import { attachEventMetrics } from './event-metrics.js';
import { MagpieMetrics } from './magpie-metrics.js';
import { startMetricsServer, type MetricsServer } from './metrics-server.js';
import { Readiness } from './readiness.js';

export interface OperatorEndpointOptions {
  /** `[metrics] listen`; "" serves nothing (metrics are still counted, for tests and `chat`). */
  listen: string;
  events: EventStream;
}

/** Metrics, readiness and the HTTP listener of one running `start` or `chat`. */
export interface OperatorEndpoint {
  metrics: MagpieMetrics;
  readiness: Readiness;
  /** Undefined when listening is off, or the address could not be bound (`problem` says why). */
  server: MetricsServer | undefined;
  problem: MagpieError | undefined;
  close(): Promise<void>;
}

/**
 * Creates the metrics (a registry of their own), feeds them from the event stream, and serves
 * them with `/healthz` and `/readyz`. A listener that cannot be bound does not stop the bot:
 * metrics are an aid, the conversation comes first; the caller reports `problem`.
 */
export async function openOperatorEndpoint(options: OperatorEndpointOptions): Promise<OperatorEndpoint> {
  const metrics = new MagpieMetrics();
  const detach = attachEventMetrics(options.events, metrics);
  const readiness = new Readiness();
  let server: MetricsServer | undefined;
  let problem: MagpieError | undefined;
  if (options.listen.trim() !== '') {
    try {
      server = await startMetricsServer({ listen: options.listen, metrics, readiness });
    } catch (error) {
      if (!(error instanceof MagpieError)) throw error;
      problem = error;
    }
  }
  return {
    metrics,
    readiness,
    server,
    problem,
    async close() {
      detach();
      await server?.close();
    },
  };
}
