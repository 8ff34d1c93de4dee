/** Shared helpers of the channel, compaction and replay tests: temp dirs, config, fakes. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChannelResponder, type TurnOutcome } from '../src/app/channel-responder.js';
import { ChannelRuntime, HistoryStore, type ChannelRuntimeOptions } from '../src/channel/index.js';
import type { HistoryEntry, IncomingMessage } from '../src/context/types.js';
import type { ChatModel, ModelRequest, ModelResponse } from '../src/llm/chat-model.js';
import type { Clock } from '../src/common/clock.js';
import { EventStream, type MagpieEvent } from '../src/common/events.js';
import type { SummarizeRequest, SummarizeResult, Summarizer } from '../src/compaction/summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import type { ChannelSettings, CompactionSettings, MagpieConfig } from '../src/config/types.js';
import type {
  MemoryRecord,
  MemoryStats,
  MemoryStore,
  SaveMemoryInput,
  SaveMemoryResult,
  SearchResult,
  TranscriptEntryInput,
} from '../src/memory/types.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { openTestDatabase } from './support/storage.js';

export function tempDir(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'magpie-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/** A config with a small window and the given compaction settings, everything else default. */
export function testConfig(
  options: { contextWindow?: number; maxResponseTokens?: number; compaction?: Partial<CompactionSettings>; systemPrompt?: string } = {},
): MagpieConfig {
  const defaults: ChannelSettings = {
    ...DEFAULTS.defaults,
    contextWindow: options.contextWindow ?? 2000,
    // Small windows want a small answer room (usage is counted against the window less it).
    maxResponseTokens: options.maxResponseTokens ?? 16,
    systemPrompt: options.systemPrompt ?? 'You are a test bot.',
    compaction: { ...DEFAULTS.defaults.compaction, ...options.compaction },
  };
  return { ...DEFAULTS, defaults };
}

/** The transcript part of a memory store, kept in a map; memories are counted only. */
export class FakeMemoryStore implements MemoryStore {
  readonly transcript = new Map<string, TranscriptEntryInput>();
  readonly saved: SaveMemoryInput[] = [];
  /** Resolve archive writes only when released (tests of "archived before compacted"). */
  holdArchives = false;
  private held: Array<() => void> = [];

  async save(input: SaveMemoryInput): Promise<SaveMemoryResult> {
    this.saved.push(input);
    return { id: `m${this.saved.length}`, status: 'saved' };
  }
  /** Archive writes fail while set (an embedder that is down). */
  failArchives = false;
  async archiveTranscript(entries: TranscriptEntryInput[]): Promise<void> {
    if (this.holdArchives) await new Promise<void>((resolve) => this.held.push(resolve));
    if (this.failArchives) throw new Error('embedder unreachable');
    for (const entry of entries) this.transcript.set(`${entry.channelId}|${entry.messageId}`, entry);
  }
  releaseArchives(): void {
    this.holdArchives = false;
    for (const resolve of this.held.splice(0)) resolve();
  }
  async updateTranscript(channelId: string, changes: ReadonlyArray<{ messageId: string; content: string }>): Promise<void> {
    for (const { messageId, content } of changes) {
      const entry = this.transcript.get(`${channelId}|${messageId}`);
      if (entry) entry.content = content;
    }
  }
  async deleteTranscript(channelId: string, messageIds: string[]): Promise<void> {
    for (const id of messageIds) this.transcript.delete(`${channelId}|${id}`);
  }
  async search(): Promise<SearchResult[]> {
    throw new Error('not implemented');
  }
  async list(): Promise<MemoryRecord[]> {
    throw new Error('not implemented');
  }
  async forget(): Promise<boolean> {
    throw new Error('not implemented');
  }
  async stats(): Promise<MemoryStats> {
    throw new Error('not implemented');
  }
  async close(): Promise<void> {}
  idsFor(channelId: string): string[] {
    return [...this.transcript.values()].filter((entry) => entry.channelId === channelId).map((entry) => entry.messageId);
  }
}

type Behaviour = (request: SummarizeRequest) => Promise<SummarizeResult>;

/**
 * A summarizer driven by the test: queued behaviours, then a default that throws "not
 * implemented" so that no test passes by accident. Records every request.
 */
export class ScriptedSummarizer implements Summarizer {
  readonly name = 'scripted';
  readonly requests: SummarizeRequest[] = [];
  private readonly queue: Behaviour[] = [];
  fallback: Behaviour = async () => {
    throw new Error('not implemented');
  };

  enqueue(...behaviours: Behaviour[]): this {
    this.queue.push(...behaviours);
    return this;
  }
  summarize(request: SummarizeRequest): Promise<SummarizeResult> {
    this.requests.push(request);
    return (this.queue.shift() ?? this.fallback)(request);
  }
}

export const replyWith = (summary: string, memoriesSaved = 0): Behaviour => async () => ({ summary, memoriesSaved });
export const never: Behaviour = () => new Promise(() => {});
export const failWith = (message: string): Behaviour => async () => {
  throw new Error(message);
};
/** Resolves when the test says so. */
export function gate(summary: string): { behaviour: Behaviour; open(): void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { behaviour: async () => (await opened, { summary, memoriesSaved: 0 }), open };
}

export class TickingClock implements Clock {
  constructor(private current = Date.UTC(2026, 0, 1)) {}
  now(): number {
    this.current += 1000;
    return this.current;
  }
}

export interface Harness {
  dir: string;
  db: SqlClient;
  memory: FakeMemoryStore;
  config: LiveConfig;
  events: MagpieEvent[];
  stream: EventStream;
  runtime: ChannelRuntime;
  /** Closes the runtime and the database (optionally keeping the directory for a restart). */
  close(options?: { keepDir?: boolean }): Promise<void>;
  ofType(type: string): MagpieEvent[];
}

export async function openHarness(
  options: Partial<ChannelRuntimeOptions> & { dir?: string; memory?: FakeMemoryStore; configValue?: MagpieConfig } = {},
): Promise<Harness> {
  const dir = options.dir ?? tempDir().path;
  const db = await openTestDatabase(dir);
  const memory = options.memory ?? new FakeMemoryStore();
  const config = options.config ?? new LiveConfig(options.configValue ?? testConfig());
  const stream = options.events ?? new EventStream();
  const events: MagpieEvent[] = [];
  stream.subscribe((event) => events.push(event));
  const runtime = new ChannelRuntime({
    db,
    memory,
    config,
    events: stream,
    summarizer: options.summarizer ?? new ScriptedSummarizer(),
    clock: options.clock ?? new TickingClock(),
    ...(options.fallbackSummarizer ? { fallbackSummarizer: options.fallbackSummarizer } : {}),
    ...(options.scheduler ? { scheduler: options.scheduler } : {}),
    ...(options.toolDefinitions ? { toolDefinitions: options.toolDefinitions } : {}),
    ...(options.usageObserver ? { usageObserver: options.usageObserver } : {}),
  });
  return {
    dir,
    db,
    memory,
    config,
    events,
    stream,
    runtime,
    ofType: (type) => events.filter((event) => event.type === type),
    async close(closeOptions = {}) {
      await runtime.close();
      await db.close();
      if (!closeOptions.keepDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

let counter = 0;
/** A user message of roughly `words` words, unique content. */
export function userMessage(channelId: string, index: number, options: { words?: number; author?: string } = {}): IncomingMessage {
  counter += 1;
  const words = Array.from({ length: options.words ?? 20 }, (_, word) => `word${(index * 7 + word) % 97}`).join(' ');
  return {
    messageId: `m${index}`,
    channelId,
    guildId: 'g1',
    authorId: `u-${options.author ?? 'alice'}`,
    authorName: options.author ?? 'alice',
    role: 'user',
    content: `Message ${index}: ${words}.`,
    createdAt: Date.UTC(2026, 0, 1) + index * 60_000,
  };
}

/**
 * Waits for queued promise callbacks (and one macrotask) to run: enough only for work that never
 * leaves the process. Whatever waits on the database (a worker landing, a write) is awaited with
 * `runtime.compactionsIdle()` or `waitUntil` (test/support/wait-until.ts).
 */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}


/**
 * A deterministic transcript of `count` lines over `channels` channels with varied lengths
 * (a small linear congruential generator, so every run writes the same file).
 */
export function generateTranscript(count: number, options: { channels?: number; seed?: number } = {}): string {
  const channels = options.channels ?? 2;
  let state = options.seed ?? 42;
  const next = () => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
  const topics = ['budget', 'deploy', 'Paris', 'hiking', 'release 2.4', 'invoice 7731', 'the cat', 'Friday', 'Postgres', 'Alice'];
  const lines: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const words = 4 + Math.floor(next() * (next() < 0.1 ? 120 : 30));
    const text = Array.from({ length: words }, () => topics[Math.floor(next() * topics.length)]).join(' ');
    lines.push(
      JSON.stringify({
        id: `msg-${index}`,
        channel: `chan-${index % channels}`,
        author: ['ann', 'ben', 'cho'][index % 3],
        content: `Note ${index} about ${text}.`,
        ts: new Date(Date.UTC(2025, 0, 1) + index * 60_000).toISOString(),
      }),
    );
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The history is consistent: every archived entry is either live or inside exactly one live
 * summary's range, summaries do not overlap, and live entries come after every summary.
 */
export async function assertConsistentHistory(db: SqlClient, channelId: string): Promise<{ archived: number; live: number; summaries: number }> {
  const loaded = await new HistoryStore(db).load(channelId);
  const archive = await new HistoryStore(db).archive(channelId);
  const live = new Set(loaded.entries.map((entry) => entry.seq));
  let previousEnd = -Infinity;
  for (const summary of loaded.summaries) {
    if (summary.fromSeq <= previousEnd) throw new Error(`summaries overlap at seq ${summary.fromSeq}`);
    if (summary.toSeq < summary.fromSeq) throw new Error('summary range reversed');
    previousEnd = summary.toSeq;
  }
  if (loaded.entries.length > 0 && loaded.entries[0]!.seq <= previousEnd) throw new Error('a live entry sits inside a summary range');
  for (const entry of archive) {
    if (live.has(entry.seq)) continue;
    const covered = loaded.summaries.filter((summary) => summary.fromSeq <= entry.seq && entry.seq <= summary.toSeq);
    if (covered.length !== 1) throw new Error(`seq ${entry.seq} is neither live nor covered by one summary`);
  }
  return { archived: archive.length, live: loaded.entries.length, summaries: loaded.summaries.length };
}

/** Ingests messages until `until` holds (or `limit` messages), returns the next index. */
export async function fill(harness: Harness, channelId: string, from: number, until: () => boolean | Promise<boolean>, limit = 500): Promise<number> {
  let index = from;
  while (!(await until()) && index < from + limit) {
    await harness.runtime.ingest(userMessage(channelId, index));
    index += 1;
  }
  assert.ok(await until(), 'fill condition reached');
  return index;
}

/** How many workers have started in the harness so far. */
export const started = (harness: Harness): number => harness.ofType('compaction_started').length;

/** A channel model whose every answer waits until the test gives it (a reply being written). */
export class GatedModel implements ChatModel {
  readonly model = 'gated';
  readonly calls: Array<{ request: ModelRequest; answer(text: string): void }> = [];

  createMessage(request: ModelRequest): Promise<ModelResponse> {
    return new Promise((resolve) => {
      // No input count: the channel's calibration stays at 1.
      const answer = (text: string) => resolve({ content: [{ type: 'text', text }], stopReason: 'end_turn', usage: { inputTokens: 0, outputTokens: 1 } });
      this.calls.push({ request, answer });
    });
  }

  /** True when some request of a call carries `text`. */
  sent(call: number, text: string): boolean {
    return JSON.stringify(this.calls[call]?.request.messages ?? []).includes(text);
  }
}

/**
 * The bot answering in a channel of the harness, as it does in Discord: each asked message gets
 * a turn in the channel's queue (the responder), the model's answers given by the test.
 */
export function channelTurns(harness: Harness, channelId: string): { model: GatedModel; outcomes: Array<Promise<TurnOutcome>>; ask(entry: HistoryEntry): Promise<TurnOutcome> } {
  const model = new GatedModel();
  const responder = new ChannelResponder({ runtime: harness.runtime, model, tools: [], config: harness.config, events: harness.stream });
  const outcomes: Array<Promise<TurnOutcome>> = [];
  let replies = 0;
  return {
    model,
    outcomes,
    ask(entry) {
      const outcome = responder.respond({
        channelId,
        userId: entry.authorId,
        turnId: entry.turnId,
        rateLimit: false,
        context: { channelId, guildId: 'g1', sourceMessageIds: [entry.messageId] },
        target: { send: async () => `reply-${(replies += 1)}` },
      });
      outcomes.push(outcome);
      return outcome;
    },
  };
}
