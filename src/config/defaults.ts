import type { MagpieConfig } from './types.js';

/** The one place every default lives. `config.toml` at the top level shows the same values. */
export const DEFAULT_SYSTEM_PROMPT =
  'You are Magpie, a helpful member of this Discord channel. Answer briefly and plainly. ' +
  'Older parts of the conversation may have been summarized; when you need a detail you do not ' +
  'see, look it up with memory_search before answering, and save lasting facts, decisions and ' +
  'preferences with memory_save.';

/**
 * The shortest prompt prefix each model caches (Anthropic's documentation), matched against the
 * model id in order; `[llm] cache_min_tokens` overrides it. Models not listed get the last row.
 */
export const CACHE_MIN_TOKENS: ReadonlyArray<{ model: RegExp; tokens: number }> = [
  { model: /opus-4-[56]/, tokens: 4096 },
  { model: /haiku-4-5/, tokens: 4096 },
  { model: /sonnet-4-6/, tokens: 2048 },
  { model: /sonnet-4-5/, tokens: 1024 },
  { model: /./, tokens: 1024 },
];

/** The minimum cacheable prefix for `model`: the configured one, else the table's. */
export function cacheMinTokensFor(model: string, configured: number): number {
  if (configured > 0) return configured;
  return CACHE_MIN_TOKENS.find((row) => row.model.test(model))?.tokens ?? 1024;
}

export const DEFAULTS: MagpieConfig = {
  defaults: {
    contextWindow: 200_000,
    systemPrompt: DEFAULT_SYSTEM_PROMPT,
    maxResponseTokens: 1024,
    minResponseTokens: 256,
    maxAgentSteps: 6,
    replyPolicy: 'mention',
    dailyTokenBudget: 0,
    budgetUnit: 'tokens',
    streamReplies: true,
    vision: true,
    maxImagesPerMessage: 4,
    maxAttachmentChars: 20_000,
    compaction: {
      backgroundThreshold: 0.8,
      aggressiveThreshold: 0.85,
      emergencyThreshold: 0.95,
      backgroundFraction: 0.3,
      aggressiveFraction: 0.5,
      emergencyFraction: 0.5,
      maxWorkerTurns: 6,
      workerTimeoutMs: 120_000,
      summaryMaxTokens: 2048,
      summaryMinTokens: 512,
      rollupThreshold: 0.25,
      fallbackAfterFailures: 3,
      coldCacheThreshold: 0,
      minTokensFreed: 16,
    },
    branch: {
      precompactThreshold: 0.6,
      maxOverflowRetries: 2,
      maxSteps: 6,
      maxConcurrent: 2,
      timeoutMs: 120_000,
      minResponseTokens: 256,
    },
    worker: {
      turnsPerSegment: 25,
      compactThreshold: 0.7,
      maxSegments: 8,
      maxConcurrent: 2,
      timeoutMs: 900_000,
      minResponseTokens: 512,
    },
  },
  channels: {},
  llm: {
    model: '',
    baseUrl: '',
    apiKeyEnv: 'ANTHROPIC_API_KEY',
    timeoutMs: 60_000,
    maxRetries: 2,
    maxConcurrentCalls: 4,
    promptCache: '5m',
    cacheMinTokens: 0,
    priceInputPerMtok: 0,
    priceOutputPerMtok: 0,
  },
  memory: {
    dataDir: './data',
    embedder: 'hash',
    hashDimension: 256,
    scope: 'channel',
    http: {
      url: 'http://127.0.0.1:11434/v1/embeddings',
      model: 'nomic-embed-text',
      apiKeyEnv: 'EMBEDDINGS_API_KEY',
      dimension: 768,
      batchSize: 64,
      timeoutMs: 30_000,
      maxRetries: 2,
    },
  },
  discord: {
    tokenEnv: 'DISCORD_TOKEN',
    allowedGuilds: [],
    allowedChannels: [],
    allowedRoles: [],
    allowedUsers: [],
    blockedUsers: [],
    dmUsers: [],
    allowedBots: [],
    debounceMs: 1200,
    debounceMaxMs: 5000,
    userTurnsPerMinute: 6,
    shutdownGraceMs: 10_000,
    registerCommands: true,
    catchUpChannels: 100,
    catchUpMessages: 500,
  },
  runtime: {
    channelIdleMs: 600_000,
    maxLoadedChannels: 2_000,
  },
  storage: {
    backend: 'sqlite',
    urlEnv: 'MAGPIE_DATABASE_URL',
    schema: 'public',
    statementTimeoutMs: 5_000,
    connectTimeoutMs: 3_000,
    poolSize: 10,
    writerThread: 'auto',
  },
  privacy: {
    editOwnReplies: true,
  },
  metrics: {
    listen: '127.0.0.1:9464',
    compactionLogDays: 30,
    compactionLogMaxRows: 500_000,
  },
  logging: {
    level: 'info',
  },
};
