/** The channel runtime: history, live context, serial turns and the Compactor behind them. */
export { ChannelRuntime, type ChannelRuntimeOptions, type LiveContext, type RuntimeObserver, type TurnEntryInput } from './runtime.js';
export { HistoryStore, type LoadedChannel, type ChannelLocation } from './history-store.js';
export { buildMessages, buildSystemPrompt } from './model-request.js';
export { renderSummary } from '../context/summary-text.js';
export type { CompactionOutcome } from '../compaction/coordinator.js';
export type { CompactionScheduler, WorkerHandle } from '../compaction/scheduler.js';
export { ImmediateScheduler, LaggedScheduler } from '../compaction/scheduler.js';
export type * from '../context/types.js';
