import type { EventStream, MagpieEvent } from '../common/events.js';
import type { MagpieMetrics } from './magpie-metrics.js';

/** Turn events and the outcome label each one counts as. */
const TURN_OUTCOMES: Readonly<Record<string, string>> = {
  agent_turn_completed: 'completed',
  agent_turn_failed: 'failed',
  turn_rate_limited: 'rate_limited',
  turn_over_budget: 'over_budget',
};

/** Compaction events that end a compaction, and the outcome label each one counts as. */
const COMPACTION_OUTCOMES: Readonly<Record<string, string>> = {
  compaction_completed: 'completed',
  compaction_failed: 'failed',
  compaction_replanned: 'replanned',
};

/**
 * Turns the typed events core code already emits into metrics: compactions and emergency
 * truncations, turns and their durations. Ids on the events (channel, user, compaction) are
 * deliberately dropped. Returns a function that detaches.
 */
export function attachEventMetrics(events: EventStream, metrics: MagpieMetrics): () => void {
  return events.subscribe((event) => record(event, metrics));
}

function record(event: MagpieEvent, metrics: MagpieMetrics): void {
  const compactionOutcome = COMPACTION_OUTCOMES[event.type];
  if (compactionOutcome !== undefined) {
    const tier = typeof event.tier === 'string' ? event.tier : 'unknown';
    metrics.compactions.inc({ tier, outcome: compactionOutcome });
    const durationMs = numberField(event, 'duration_ms');
    if (durationMs !== undefined) metrics.compactionDuration.observe({ tier }, durationMs / 1000);
    // A summary that lands in place of a truncation marker can free less than nothing; a
    // histogram's sum must only grow, so that counts as 0.
    const freed = event.tokens_freed;
    if (compactionOutcome === 'completed' && typeof freed === 'number' && Number.isFinite(freed)) {
      metrics.compactionTokensFreed.observe(Math.max(0, freed));
    }
    return;
  }
  if (event.type === 'emergency_truncation') {
    metrics.emergencyTruncations.inc();
    return;
  }
  const turnOutcome = TURN_OUTCOMES[event.type];
  if (turnOutcome !== undefined) {
    metrics.turns.inc({ outcome: turnOutcome });
    const durationMs = numberField(event, 'duration_ms');
    if (durationMs !== undefined) metrics.turnDuration.observe(durationMs / 1000);
  }
}

function numberField(event: MagpieEvent, field: string): number | undefined {
  const value = event[field];
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : undefined;
}
