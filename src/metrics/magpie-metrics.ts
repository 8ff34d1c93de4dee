import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** Default Node metrics left out: gauges with a counter's `_total` suffix. */
export const NOT_COUNTERS: readonly string[] = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];
import type { ModelCallObserver, ModelCallRecord } from '../llm/observed-model.js';
import type { MemoryStats } from '../memory/types.js';
import { FastHistogram } from './fast-histogram.js';

/** What the sampled gauges read. */
export interface GaugeSources {
  channelsLoaded?: () => number;
  memoryStats?: () => MemoryStats | Promise<MemoryStats>;
}

/**
 * Every metric Magpie exports, on a registry of its own (never prom-client's global one), so
 * that two apps in one process, or two tests, never share counters. The names and labels are a
 * contract: dashboards and alerts rely on them. No label carries a channel or user id: their
 * number is unbounded and would grow the series without limit.
 */
export class MagpieMetrics {
  readonly registry = new Registry();

  readonly compactions = new Counter({
    name: 'magpie_compactions_total',
    help: 'Compactions that ended, by tier (background, aggressive, manual) and outcome (completed, failed, replanned).',
    labelNames: ['tier', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly emergencyTruncations = new Counter({
    name: 'magpie_emergency_truncations_total',
    help: 'Emergency truncations: the oldest part of a context dropped at once, without a summary.',
    registers: [this.registry],
  });

  readonly compactionDuration = new Histogram({
    name: 'magpie_compaction_duration_seconds',
    help: 'Time from the start of a compaction to its summary landing (or failing), by tier.',
    labelNames: ['tier'] as const,
    buckets: [0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  readonly compactionTokensFreed = new Histogram({
    name: 'magpie_compaction_freed_tokens',
    help: 'Estimated tokens a completed compaction or an emergency truncation took out of the context.',
    buckets: [100, 500, 1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 200_000, 500_000],
    registers: [this.registry],
  });

  /** Observed after every message: a histogram cheaper than prom-client's (see FastHistogram). */
  readonly contextUsage = new FastHistogram(
    'magpie_context_usage_ratio',
    'Context usage (estimated tokens / context window) seen by each Compactor check.',
    [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 1],
    this.registry,
  );

  private sources: GaugeSources = {};

  readonly channelsLoaded = new Gauge({
    name: 'magpie_channels_loaded',
    help: 'Channels whose history is loaded in memory.',
    registers: [this.registry],
    collect: () => {
      const count = this.sources.channelsLoaded?.();
      if (count !== undefined) this.channelsLoaded.set(count);
    },
  });

  readonly messagesIngested = new Counter({
    name: 'magpie_messages_ingested_total',
    help: 'Platform messages appended to a channel history (duplicates not counted).',
    registers: [this.registry],
  });

  readonly turns = new Counter({
    name: 'magpie_turns_total',
    help: 'Channel agent turns, by outcome (completed, failed, rate_limited, over_budget).',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly turnDuration = new Histogram({
    name: 'magpie_turn_duration_seconds',
    help: 'Time of one channel agent turn, from its start in the channel queue to its reply.',
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160],
    registers: [this.registry],
  });

  readonly modelRequests = new Counter({
    name: 'magpie_model_requests_total',
    help: 'Model calls, by purpose (channel, compaction, branch, worker) and outcome (ok, error).',
    labelNames: ['purpose', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly modelTokens = new Counter({
    name: 'magpie_model_tokens_total',
    help: 'Tokens the model reported, by purpose and direction (input, output): what the operator pays for.',
    labelNames: ['purpose', 'direction'] as const,
    registers: [this.registry],
  });

  readonly modelInputTokens = new Counter({
    name: 'magpie_model_input_tokens_total',
    help: 'Input tokens the model reported, by purpose and part: uncached (full price), cache_write (1.25x, or 2x with the 1h lifetime), cache_read (0.1x).',
    labelNames: ['purpose', 'part'] as const,
    registers: [this.registry],
  });

  readonly modelOutputTokens = new Counter({
    name: 'magpie_model_output_tokens_total',
    help: 'Output tokens the model reported, by purpose.',
    labelNames: ['purpose'] as const,
    registers: [this.registry],
  });

  readonly modelBilledInputTokens = new Counter({
    name: 'magpie_model_billed_input_tokens_total',
    help: 'Input as billed, in full-price token equivalents (the prompt cache weights applied), by purpose.',
    labelNames: ['purpose'] as const,
    registers: [this.registry],
  });

  readonly modelRequestDuration = new Histogram({
    name: 'magpie_model_request_duration_seconds',
    help: 'Time of one model call by purpose, retries and the wait for a free call slot included.',
    labelNames: ['purpose'] as const,
    buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120],
    registers: [this.registry],
  });

  readonly memoryItems = new Gauge({
    name: 'magpie_memory_items',
    help: 'Items in the memory store, by kind (memory: saved memories, transcript: archived messages).',
    labelNames: ['kind'] as const,
    registers: [this.registry],
    collect: async () => {
      // One grouped COUNT over all channels; a failed read leaves the last values.
      let stats: MemoryStats | undefined;
      try {
        stats = await this.sources.memoryStats?.();
      } catch {
        return;
      }
      if (!stats) return;
      this.memoryItems.set({ kind: 'memory' }, stats.memories);
      this.memoryItems.set({ kind: 'transcript' }, stats.transcriptEntries);
    },
  });

  readonly memorySearchDuration = new Histogram({
    name: 'magpie_memory_search_duration_seconds',
    help: 'Time of one memory search (vectors and full text fused).',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });

  /** Records each model call; hand it to `observeModel` with the call's purpose. */
  readonly modelObserver: ModelCallObserver = {
    modelCalled: (call: ModelCallRecord) => {
      this.modelRequests.inc({ purpose: call.purpose, outcome: call.outcome });
      // The request's whole input: what was read from and written to the cache is input too.
      const wholeInput = call.inputTokens + call.cacheWriteTokens + call.cacheReadTokens;
      if (wholeInput > 0) this.modelTokens.inc({ purpose: call.purpose, direction: 'input' }, wholeInput);
      if (call.outputTokens > 0) this.modelTokens.inc({ purpose: call.purpose, direction: 'output' }, call.outputTokens);
      if (call.inputTokens > 0) this.modelInputTokens.inc({ purpose: call.purpose, part: 'uncached' }, call.inputTokens);
      if (call.cacheWriteTokens > 0) this.modelInputTokens.inc({ purpose: call.purpose, part: 'cache_write' }, call.cacheWriteTokens);
      if (call.cacheReadTokens > 0) this.modelInputTokens.inc({ purpose: call.purpose, part: 'cache_read' }, call.cacheReadTokens);
      if (call.outputTokens > 0) this.modelOutputTokens.inc({ purpose: call.purpose }, call.outputTokens);
      if (call.billedInputTokens > 0) this.modelBilledInputTokens.inc({ purpose: call.purpose }, call.billedInputTokens);
      this.modelRequestDuration.observe({ purpose: call.purpose }, call.durationMs / 1000);
    },
  };

  constructor(options: { defaultMetrics?: boolean } = {}) {
    // Process CPU, memory, event-loop lag, handles: what every Node service exports.
    if (options.defaultMetrics !== false) {
      collectDefaultMetrics({ register: this.registry });
      // Gauges that prom-client names like counters (`_total`), which Prometheus' own lint
      // (promtool check metrics) refuses; the per-type gauges beside them hold the same numbers.
      for (const name of NOT_COUNTERS) this.registry.removeSingleMetric(name);
    }
    // Label sets that exist from the start show as 0 rather than missing, so rate() and alerts
    // on them work before the first event.
    for (const tier of ['background', 'aggressive', 'manual']) {
      for (const outcome of ['completed', 'failed', 'replanned']) this.compactions.inc({ tier, outcome }, 0);
    }
    for (const outcome of ['completed', 'failed']) this.turns.inc({ outcome }, 0);
    for (const purpose of ['channel', 'compaction']) {
      for (const outcome of ['ok', 'error']) this.modelRequests.inc({ purpose, outcome }, 0);
      for (const part of ['uncached', 'cache_write', 'cache_read']) this.modelInputTokens.inc({ purpose, part }, 0);
      this.modelOutputTokens.inc({ purpose }, 0);
      this.modelBilledInputTokens.inc({ purpose }, 0);
    }
  }

  /**
   * Where the sampled gauges read from, once the app is open (until then they stay at 0).
   * Sampled on every scrape: cheaper than tracking each change.
   */
  attachSources(sources: GaugeSources): void {
    this.sources = sources;
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
