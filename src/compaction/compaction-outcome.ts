/**
 * How `compactNow` ended. A file of its own because the coordinator, which starts a compaction,
 * and the landing, which finishes it, both speak of it.
 */
export interface CompactionOutcome {
  status: 'completed' | 'failed' | 'replanned' | 'busy' | 'nothing_to_compact';
  compactionId?: string;
  reason?: string;
  messagesCompacted?: number;
  tokensFreed?: number;
}
