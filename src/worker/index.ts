/** Workers: background tasks the channel agent starts, which report back in the channel. */
export { WorkerManager, type WorkerInfo, type WorkerManagerOptions, type WorkerRuntime, type SpawnRequest } from './worker-manager.js';
export { createSpawnWorkerTool, MAX_TASK_LENGTH } from './spawn-worker-tool.js';
export { createChannelHistoryTool, MAX_HISTORY_LIMIT, type HistoryMessage } from './channel-history-tool.js';
export { runWorker, type RunWorkerOptions, type WorkerResult } from './run-worker.js';
export { trimWorkerHistory, estimateConversation } from './trim-history.js';
export { WORKER_MIGRATIONS, WorkerStore, type WorkerStatus, type WorkerRow } from './worker-store.js';
export { WORKER_SYSTEM_PROMPT, taskStatement } from './worker-prompt.js';
