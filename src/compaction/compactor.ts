import type { CompactionSettings } from '../config/types.js';

/** What the Compactor decides after a check. */
export type CompactionAction = 'emergency' | 'aggressive' | 'background' | 'none';

/** The little a decision needs to know about the channel besides its usage. */
export interface CompactorState {
  /** A worker holds the channel's compaction lock. */
  compactionRunning: boolean;
}

/**
 * The Compactor's whole policy, pure and allocation-free so it can run after every message.
 * Emergency wins even over a running worker (it pre-empts, it does not cancel); the worker
 * tiers wait while another compaction holds the lock.
 */
export function decide(usage: number, settings: CompactionSettings, state: CompactorState): CompactionAction {
  if (usage >= settings.emergencyThreshold) return 'emergency';
  if (state.compactionRunning) return 'none';
  if (usage >= settings.aggressiveThreshold) return 'aggressive';
  if (usage >= settings.backgroundThreshold) return 'background';
  return 'none';
}
