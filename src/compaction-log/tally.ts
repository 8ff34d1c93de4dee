import type { ChannelLog, LoggedEvent } from './read-log.js';

/** Counts over a channel's compaction log: what the report's table and `status` show. */
export interface CompactionTally {
  /** Compactions started, by tier (`compaction_triggered`, plus manual ones). */
  triggered: { background: number; aggressive: number; emergency: number; manual: number };
  /** Workers whose summary landed, by tier. */
  completed: { background: number; aggressive: number; manual: number };
  failed: number;
  replanned: number;
  emergencies: number;
  /** Summaries written (= completed workers). */
  summaries: number;
  memoriesSaved: number;
  messagesSummarized: number;
  messagesTruncated: number;
  /** Tokens that left the live context: summaries' net gain plus truncations. */
  tokensFreed: number;
  tokensFreedByTier: { background: number; aggressive: number; emergency: number; manual: number };
  /** The newest completed compaction or truncation. */
  last?: { tier: string; at: number; tokensFreed: number; messages: number };
}

type Tier = keyof CompactionTally['triggered'];

export function emptyTally(): CompactionTally {
  return {
    triggered: { background: 0, aggressive: 0, emergency: 0, manual: 0 },
    completed: { background: 0, aggressive: 0, manual: 0 },
    failed: 0,
    replanned: 0,
    emergencies: 0,
    summaries: 0,
    memoriesSaved: 0,
    messagesSummarized: 0,
    messagesTruncated: 0,
    tokensFreed: 0,
    tokensFreedByTier: { background: 0, aggressive: 0, emergency: 0, manual: 0 },
  };
}

/** Adds up the events of one channel (or of several: call `addEvent` for each). */
export function tallyLog(log: Pick<ChannelLog, 'events'>, since = Number.NEGATIVE_INFINITY): CompactionTally {
  const tally = emptyTally();
  for (const event of log.events) if (event.at >= since) addEvent(tally, event);
  return tally;
}

export function addEvent(tally: CompactionTally, event: LoggedEvent): void {
  const tier = event.tier as Tier | null;
  const number = (key: string) => (typeof event.data[key] === 'number' ? (event.data[key] as number) : 0);
  switch (event.kind) {
    case 'compaction_triggered':
      if (tier && tier in tally.triggered) tally.triggered[tier] += 1;
      break;
    case 'compaction_started':
      // `/compact` starts a worker without a trigger.
      if (tier === 'manual') tally.triggered.manual += 1;
      break;
    case 'compaction_completed': {
      if (tier && tier !== 'emergency' && tier in tally.completed) tally.completed[tier] += 1;
      // Logs written before summaries in place of a marker counted as freeing nothing may hold
      // negative figures: what was freed is never less than nothing.
      const freed = Math.max(0, number('tokens_freed'));
      tally.summaries += 1;
      tally.memoriesSaved += number('memories_saved');
      tally.messagesSummarized += number('messages_compacted');
      tally.tokensFreed += freed;
      if (tier && tier in tally.tokensFreedByTier) tally.tokensFreedByTier[tier] += freed;
      tally.last = { tier: tier ?? 'unknown', at: event.at, tokensFreed: freed, messages: number('messages_compacted') };
      break;
    }
    case 'emergency_truncation': {
      // Logs written before summaries in place of a marker counted as freeing nothing may hold
      // negative figures: what was freed is never less than nothing.
      const freed = Math.max(0, number('tokens_freed'));
      tally.emergencies += 1;
      tally.messagesTruncated += number('messages_dropped');
      tally.tokensFreed += freed;
      tally.tokensFreedByTier.emergency += freed;
      tally.last = { tier: 'emergency', at: event.at, tokensFreed: freed, messages: number('messages_dropped') };
      break;
    }
    case 'compaction_failed':
      tally.failed += 1;
      break;
    case 'compaction_replanned':
      tally.replanned += 1;
      break;
    default:
      break;
  }
}

/** Sums several tallies (a run's channels). */
export function sumTallies(tallies: readonly CompactionTally[]): CompactionTally {
  const total = emptyTally();
  for (const tally of tallies) {
    for (const key of Object.keys(total.triggered) as Tier[]) total.triggered[key] += tally.triggered[key];
    for (const key of Object.keys(total.completed) as Array<keyof CompactionTally['completed']>) total.completed[key] += tally.completed[key];
    for (const key of Object.keys(total.tokensFreedByTier) as Tier[]) total.tokensFreedByTier[key] += tally.tokensFreedByTier[key];
    total.failed += tally.failed;
    total.replanned += tally.replanned;
    total.emergencies += tally.emergencies;
    total.summaries += tally.summaries;
    total.memoriesSaved += tally.memoriesSaved;
    total.messagesSummarized += tally.messagesSummarized;
    total.messagesTruncated += tally.messagesTruncated;
    total.tokensFreed += tally.tokensFreed;
  }
  return total;
}
