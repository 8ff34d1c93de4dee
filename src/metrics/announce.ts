import type { OperatorEndpoint } from './operator-endpoint.js';

/** The pino methods used; a pino `Logger` fits. */
interface AnnounceLogger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

/** One log line saying where metrics are served, or why they are not. */
export function announceOperatorEndpoint(operator: OperatorEndpoint, logger: AnnounceLogger): void {
  if (operator.server) {
    const base = `http://${operator.server.address}`;
    logger.info({ event: 'metrics_listening', address: operator.server.address }, `metrics on ${base}/metrics, health on ${base}/healthz and ${base}/readyz`);
  } else if (operator.problem) {
    logger.warn(
      { event: 'metrics_listen_failed', listen: operator.problem.context.listen, error: operator.problem.message, hint: operator.problem.hint },
      'metrics and health checks are off: the listen address could not be bound',
    );
  }
}
