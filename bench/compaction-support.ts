/** Setup shared by the compaction benchmarks: a runtime on a temp SQLite file, fast history fill. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChannelRuntime, HistoryStore, type ChannelRuntimeOptions } from '../src/channel/index.js';
import { estimateEntryTokens } from '../src/context/token-estimate.js';
import type { HistoryEntry } from '../src/context/types.js';
import { EventStream } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import type { MagpieConfig } from '../src/config/types.js';
import type { MemoryStore } from '../src/memory/types.js';
import { openDatabase } from '../src/storage/database.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';

/** Accepts transcript writes and does nothing: these benchmarks time the channel side only. */
export const nullMemory: MemoryStore = {
  save: async () => ({ id: 'x', status: 'saved' }),
  archiveTranscript: async () => {},
  updateTranscript: async () => {},
  deleteTranscript: async () => {},
  search: async () => [],
  list: async () => [],
  forget: async () => false,
  stats: async () => ({ memories: 0, transcriptEntries: 0, byType: {}, embedder: 'none', dimension: 0, indexedVectors: 0, pendingVectors: 0 }),
  close: async () => {},
};

export function benchConfig(contextWindow: number, channels: Record<string, number> = {}): MagpieConfig {
  const defaults = { ...DEFAULTS.defaults, contextWindow };
  return {
    ...DEFAULTS,
    defaults,
    channels: Object.fromEntries(Object.entries(channels).map(([id, window]) => [id, { ...defaults, contextWindow: window }])),
  };
}

export interface BenchRuntime {
  db: SqlClient;
  runtime: ChannelRuntime;
  close(): Promise<void>;
}

export async function openBenchRuntime(config: MagpieConfig, options: Partial<ChannelRuntimeOptions> = {}, existingDir?: string): Promise<BenchRuntime> {
  const dir = existingDir ?? mkdtempSync(join(tmpdir(), 'magpie-bench-'));
  const db = await openDatabase(dir, ALL_MIGRATIONS);
  const runtime = new ChannelRuntime({
    db,
    memory: nullMemory,
    config: new LiveConfig(config),
    events: new EventStream(),
    summarizer: createExtractiveSummarizer(),
    ...options,
  });
  return {
    db,
    runtime,
    async close() {
      await runtime.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Writes `count` archived, live messages of about `words` words straight into SQLite in one
 * transaction (setup, not what is measured); the runtime loads them on first use.
 */
export async function fillHistory(db: SqlClient, channelId: string, count: number, words = 40): Promise<number> {
  const store = new HistoryStore(db);
  let tokens = 0;
  await db.transaction(async () => {
    for (let seq = 1; seq <= count; seq += 1) {
      const content = Array.from({ length: words }, (_, word) => `w${(seq * 31 + word) % 1009}`).join(' ');
      const entry: HistoryEntry = {
        seq,
        channelId,
        messageId: `${channelId}-m${seq}`,
        kind: 'message',
        role: 'user',
        authorId: 'u1',
        authorName: 'alice',
        content,
        createdAt: Date.UTC(2026, 0, 1) + seq * 1000,
        tokens: 0,
        turnId: seq,
      };
      entry.tokens = estimateEntryTokens(entry);
      tokens += entry.tokens;
      await store.insert(entry, {});
    }
    await db.prepare('UPDATE history_entries SET archived = 1 WHERE channel_id = ?').run(channelId);
  });
  return tokens;
}
