/** Operating Magpie: Prometheus metrics, `/healthz` and `/readyz` on `[metrics] listen`. */
export { MagpieMetrics, type GaugeSources } from './magpie-metrics.js';
export { attachEventMetrics } from './event-metrics.js';
export { startMetricsServer, type MetricsServer, type MetricsServerOptions } from './metrics-server.js';
export { openOperatorEndpoint, type OperatorEndpoint, type OperatorEndpointOptions } from './operator-endpoint.js';
export { Readiness, type ReadinessCheck } from './readiness.js';
export { timeMemorySearch } from './timed-memory.js';
export { announceOperatorEndpoint } from './announce.js';
export { databaseProblem, storageState } from './app-readiness.js';
export { shardListen } from './shard-listen.js';
