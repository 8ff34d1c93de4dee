/**
 * The soak: many channels × many messages through the real channel runtime, on a real SQLite
 * data dir, with a window small enough that compaction fires in every channel (extractive
 * summarizer, and the real LLM summarizer against the fake Messages API, with latency, for a
 * share of channels), and a loaded-channel cap far below the number of channels. At the end,
 * `verifyNothingLost` checks from the data that every message sent is in its channel's archive
 * and found by memory_search with its own text.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ChannelRuntime } from '../src/channel/index.js';
import { HistoryStore } from '../src/channel/history-store.js';
import { EventStream } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { createLlmSummarizer } from '../src/compaction/llm-summarizer.js';
import type { Summarizer } from '../src/compaction/summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import type { MagpieConfig } from '../src/config/types.js';
import { createAnthropicModel, limitConcurrency } from '../src/llm/index.js';
import { createMemoryTools, openMemoryStore } from '../src/memory/index.js';
import { openChannelViews } from '../src/privacy/channel-views.js';
import type { MemoryStore } from '../src/memory/types.js';
import { openDatabase } from '../src/storage/database.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { startFakeAnthropic } from '../test/fakes/fake-anthropic.js';

export interface SoakOptions {
  channels: number;
  messagesPerChannel: number;
  /** `[runtime] max_loaded_channels`. */
  maxLoadedChannels: number;
  /** Channels receiving messages at the same time (the rest wait their turn, then idle). */
  activeChannels: number;
  /** Tokens; small, so compaction fires everywhere. */
  contextWindow: number;
  /** Share of channels compacted by the model (fake Messages API), the rest extractively. */
  modelShare: number;
  modelLatencyMs: number;
  /** `all`: every message is searched for; `sample`: first, middle and last of each channel. */
  search: 'all' | 'sample';
  /** Progress lines go here (the benchmark prints them; tests stay quiet). */
  progress?: (line: string) => void;
}

export interface NothingLostVerdict {
  ok: boolean;
  sent: number;
  missingFromArchive: number;
  missingFromTranscript: number;
  searched: number;
  notFound: number;
  /** A few of the ids that failed, for the reader. */
  examples: string[];
}

export interface SoakReport {
  options: SoakOptions;
  messages: number;
  ingestSeconds: number;
  messagesPerSecond: number;
  peakRssBytes: number;
  /** Peak RSS while the verdict searched every channel in turn (each search loads that channel's index). */
  peakRssVerifyBytes: number;
  baselineRssBytes: number;
  peakLoadedChannels: number;
  /** Heap still held per channel once every channel is unloaded (after a GC when exposed). */
  heapPerIdleChannelBytes: number;
  rssPerIdleChannelBytes: number;
  tiers: { background: number; aggressive: number; emergency: number };
  completed: { extractive: number; model: number };
  failed: number;
  verdict: NothingLostVerdict;
  verifySeconds: number;
}

/** The text of message `index` of channel `channel`: conversational, with one unique token. */
export function soakText(channel: number, index: number): string {
  const topics = ['the garden rota', 'the budget', 'Friday deploy', 'invoice numbers', 'the trip to Lyon', 'release notes', 'the cat', 'lunch'];
  const topic = topics[(channel * 7 + index * 3) % topics.length]!;
  return `About ${topic}: point ${index} from channel ${channel}, reference k${channel}x${index}, we agreed to follow up next week.`;
}

export function soakChannelId(channel: number): string {
  return `soak-${channel}`;
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'magpie-soak-'));
  const model = await startFakeAnthropic();
  model.setDefault({ delayMs: options.modelLatencyMs, then: { text: 'The channel discussed its plans; decisions and references are kept in the archive.' } });
  const config: MagpieConfig = {
    ...DEFAULTS,
    defaults: { ...DEFAULTS.defaults, contextWindow: options.contextWindow, maxResponseTokens: 100, systemPrompt: 'Soak.' },
    llm: { ...DEFAULTS.llm, model: 'claude-soak', baseUrl: model.baseUrl, maxRetries: 0, timeoutMs: 30_000 },
    memory: { ...DEFAULTS.memory, dataDir },
    runtime: { channelIdleMs: 1_000, maxLoadedChannels: options.maxLoadedChannels },
  };
  const db = await openDatabase(dataDir, ALL_MIGRATIONS);
  const views = await openChannelViews(db);
  const memory = await openMemoryStore({ db, dataDir, settings: config.memory, ...(views ? { views } : {}) });
  const modelEvery = options.modelShare > 0 ? Math.max(1, Math.round(1 / options.modelShare)) : 0;
  const usesModel = (channelId: string): boolean => modelEvery > 0 && Number(channelId.slice('soak-'.length)) % modelEvery === 0;
  const events = new EventStream();
  const tiers = { background: 0, aggressive: 0, emergency: 0 };
  const completed = { extractive: 0, model: 0 };
  let failed = 0;
  events.subscribe((event) => {
    if (event.type === 'compaction_triggered' && typeof event.tier === 'string' && event.tier in tiers) tiers[event.tier as keyof typeof tiers] += 1;
    if (event.type === 'emergency_truncation') tiers.emergency += 1;
    if (event.type === 'compaction_completed') completed[usesModel(String(event.channel_id)) ? 'model' : 'extractive'] += 1;
    if (event.type === 'compaction_failed') failed += 1;
  });
  const extractive = createExtractiveSummarizer();
  const llm = createLlmSummarizer({
    model: limitConcurrency(createAnthropicModel(config.llm, { env: {} }), 16),
    memoryTools: createMemoryTools(memory),
  });
  const summarizer: Summarizer = {
    name: 'soak',
    summarize: (request) => (usesModel(request.channelId) ? llm : extractive).summarize(request),
  };
  const runtime = new ChannelRuntime({ db, memory, config: new LiveConfig(config), events, summarizer });

  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const baselineRss = process.memoryUsage().rss;
  const baselineHeap = process.memoryUsage().heapUsed;
  let peakRss = baselineRss;
  let peakLoaded = 0;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 50);
  let verifySampler: NodeJS.Timeout | undefined;
  const started = performance.now();
  try {
    let sent = 0;
    for (let first = 0; first < options.channels; first += options.activeChannels) {
      const last = Math.min(options.channels, first + options.activeChannels);
      const inFlight: Array<Promise<unknown>> = [];
      for (let index = 0; index < options.messagesPerChannel; index += 1) {
        for (let channel = first; channel < last; channel += 1) {
          inFlight.push(
            runtime.ingest({
              messageId: `k${channel}x${index}`,
              channelId: soakChannelId(channel),
              guildId: 'soak-guild',
              authorId: `u${(channel + index) % 5}`,
              authorName: ['ann', 'ben', 'cho', 'dee', 'eve'][(channel + index) % 5]!,
              role: 'user',
              content: soakText(channel, index),
              createdAt: Date.UTC(2026, 0, 1) + index * 60_000,
            }),
          );
          sent += 1;
        }
        // As many in flight as a busy gateway delivers; each awaited (durably committed).
        await Promise.all(inFlight);
        inFlight.length = 0;
        peakLoaded = Math.max(peakLoaded, runtime.loadedChannels);
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
      }
      // The fake model records every request; that memory is the fake's, not Magpie's.
      model.requests.length = 0;
      if (first % (options.activeChannels * 10) === 0) {
        options.progress?.(`  ${sent} messages, ${last} channels, ${runtime.loadedChannels} loaded, rss ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
      }
    }
    await runtime.flushCompactions();
    const ingestSeconds = (performance.now() - started) / 1000;
    clearInterval(sampler);

    // Every channel goes idle: once unloaded, what does an idle channel still cost?
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    runtime.unloadIdle();
    gc?.();
    const idleRss = process.memoryUsage().rss;
    const idleHeap = process.memoryUsage().heapUsed;

    let peakVerifyRss = process.memoryUsage().rss;
    verifySampler = setInterval(() => {
      peakVerifyRss = Math.max(peakVerifyRss, process.memoryUsage().rss);
    }, 50);
    const verifyStarted = performance.now();
    const verdict = await verifyNothingLost({ db, memory, channels: options.channels, messagesPerChannel: options.messagesPerChannel, search: options.search });
    clearInterval(verifySampler);
    peakVerifyRss = Math.max(peakVerifyRss, process.memoryUsage().rss);
    const messages = options.channels * options.messagesPerChannel;
    return {
      options,
      messages,
      ingestSeconds,
      messagesPerSecond: messages / ingestSeconds,
      peakRssBytes: peakRss,
      peakRssVerifyBytes: peakVerifyRss,
      baselineRssBytes: baselineRss,
      peakLoadedChannels: peakLoaded,
      heapPerIdleChannelBytes: Math.max(0, idleHeap - baselineHeap) / options.channels,
      rssPerIdleChannelBytes: Math.max(0, idleRss - baselineRss) / options.channels,
      tiers,
      completed,
      failed,
      verdict,
      verifySeconds: (performance.now() - verifyStarted) / 1000,
    };
  } finally {
    clearInterval(sampler);
    clearInterval(verifySampler);
    await runtime.close();
    await memory.close();
    await db.close();
    await model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * From the data alone: every message sent (`k<channel>x<index>`) is in its channel's archive
 * (history) and in its searchable transcript, and memory_search with its own text returns it.
 */
export async function verifyNothingLost(options: {
  db: SqlClient;
  memory: MemoryStore;
  channels: number;
  messagesPerChannel: number;
  search: 'all' | 'sample';
}): Promise<NothingLostVerdict> {
  const history = new HistoryStore(options.db);
  const transcriptIds = options.db.prepare(`SELECT message_id FROM memory_items WHERE channel_id = ? AND kind = 'transcript'`).pluck();
  const verdict: NothingLostVerdict = { ok: true, sent: 0, missingFromArchive: 0, missingFromTranscript: 0, searched: 0, notFound: 0, examples: [] };
  const fail = (id: string): void => {
    verdict.ok = false;
    if (verdict.examples.length < 5) verdict.examples.push(id);
  };
  for (let channel = 0; channel < options.channels; channel += 1) {
    const channelId = soakChannelId(channel);
    const archived = new Set((await history.archive(channelId)).map((entry) => entry.messageId));
    const transcribed = new Set((await transcriptIds.all(channelId)) as string[]);
    const last = options.messagesPerChannel - 1;
    const sample = options.search === 'all' ? null : new Set([0, Math.floor(last / 2), last]);
    for (let index = 0; index < options.messagesPerChannel; index += 1) {
      const id = `k${channel}x${index}`;
      verdict.sent += 1;
      if (!archived.has(id)) {
        verdict.missingFromArchive += 1;
        fail(id);
      }
      if (!transcribed.has(id)) {
        verdict.missingFromTranscript += 1;
        fail(id);
      }
      if (sample && !sample.has(index)) continue;
      verdict.searched += 1;
      // A bot's searches come one per turn, between network reads; so do these (native index
      // memory is returned on a later turn of the event loop, never inside a run of promises).
      if (verdict.searched % 16 === 0) await new Promise((resolve) => setImmediate(resolve));
      const results = await options.memory.search({ location: { channelId, guildId: 'soak-guild' }, query: soakText(channel, index), limit: 5 });
      if (!results.some((result) => result.source_ids.includes(id))) {
        verdict.notFound += 1;
        fail(id);
      }
    }
  }
  return verdict;
}
