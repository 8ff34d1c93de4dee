/** Compaction: the Compactor's policy, workers, emergency truncation and the summarizers. */
export { decide, type CompactionAction, type CompactorState } from './compactor.js';
export { CompactionCoordinator, type CompactionOutcome } from './coordinator.js';
export { createExtractiveSummarizer, extractiveSummary } from './extractive-summarizer.js';
export { ImmediateScheduler, LaggedScheduler, type CompactionScheduler, type WorkerHandle } from './scheduler.js';
export { alignedCut, planCompaction, type CompactionPlan } from './planner.js';
export { markerText, truncationCount } from './emergency.js';
export type * from './events.js';
export type { Summarizer, SummarizeRequest, SummarizeResult } from './summarizer.js';
