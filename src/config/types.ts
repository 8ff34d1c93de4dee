/**
 * The validated, typed configuration that flows inward from `config.toml`. Keys are the TOML
 * keys in camelCase. Objects handed to core code are frozen; a hot reload swaps in a new one.
 */

export type ReplyPolicy = 'mention' | 'always' | 'listen';
export type MemoryScope = 'channel' | 'guild' | 'global';
export type EmbedderKind = 'hash' | 'http';
/** What the daily budget counts: whole tokens, or input tokens weighted as the prompt cache bills them. */
export type BudgetUnit = 'tokens' | 'billed';
/** The prompt cache's lifetime for Magpie's breakpoints, or no breakpoints at all. */
export type PromptCacheSetting = '5m' | '1h' | 'off';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** `[defaults.compaction]`, overridable per channel. */
export interface CompactionSettings {
  /** Usage at which a background worker summarizes the oldest `backgroundFraction`. */
  backgroundThreshold: number;
  /** Usage at which a worker summarizes the oldest `aggressiveFraction`. */
  aggressiveThreshold: number;
  /** Usage at which the oldest `emergencyFraction` is dropped synchronously. */
  emergencyThreshold: number;
  backgroundFraction: number;
  aggressiveFraction: number;
  emergencyFraction: number;
  /** Bounded tool loop of one compaction worker (model calls). */
  maxWorkerTurns: number;
  /** A worker that takes longer is abandoned; history stays unchanged. */
  workerTimeoutMs: number;
  /** Upper bound on the summary the model writes. */
  summaryMaxTokens: number;
  /**
   * The least room a summary request leaves for the summary: `summary_max_tokens` is lowered to
   * what the window leaves beside the transcript, never below this (a smaller range is taken).
   */
  summaryMinTokens: number;
  /** When stacked summaries exceed this share of the window they roll up into one. */
  rollupThreshold: number;
  /** After this many failed model compactions in a row, the extractive summarizer stands in. */
  fallbackAfterFailures: number;
  /**
   * Usage from which a background compaction starts early when the channel's prompt cache has
   * gone cold (idle longer than `[llm] prompt_cache`): it lands while nobody pays for the cache.
   * 0 = off.
   */
  coldCacheThreshold: number;
  /** A summary that would free fewer tokens than this (range minus summary) is not landed. */
  minTokensFreed: number;
}

/** `[defaults.branch]`: a branch forks the channel's context to think about one question. */
export interface BranchSettings {
  /** Share of the window over which the forked history is compacted before the first call. */
  precompactThreshold: number;
  /** How many times a context-overflow error is answered by compacting harder and retrying. */
  maxOverflowRetries: number;
  /** Model calls one branch may make (tool loop bound). */
  maxSteps: number;
  /** Branches one channel may run at once. */
  maxConcurrent: number;
  /** A branch still thinking after this long answers with what it has. */
  timeoutMs: number;
  /** `max_tokens` of a branch's call is never lowered below this to fit the window (its fork shrinks instead). */
  minResponseTokens: number;
}

/** `[defaults.worker]`: a background worker runs a longer task and reports back. */
export interface WorkerSettings {
  /** Model turns per segment; the worker's history is checked between segments. */
  turnsPerSegment: number;
  /** Share of the window over which old tool calls and results are dropped between segments. */
  compactThreshold: number;
  /** Segments at most; a worker that reaches it reports what it has. */
  maxSegments: number;
  /** Workers one channel may run at once. */
  maxConcurrent: number;
  /** A worker still running after this long is stopped and reports a timeout. */
  timeoutMs: number;
  /** `max_tokens` of a worker's call is never lowered below this to fit the window (its history is trimmed instead). */
  minResponseTokens: number;
}

/** `[defaults]`: everything a channel may override in `[channels."<id>"]`. */
export interface ChannelSettings {
  /** Model context window in tokens; usage = estimated tokens / contextWindow. */
  contextWindow: number;
  /** Persona / system prompt of the channel agent. */
  systemPrompt: string;
  /** Upper bound on one reply. */
  maxResponseTokens: number;
  /** `max_tokens` of a reply is never lowered below this to fit the window (the context is truncated instead). */
  minResponseTokens: number;
  /** Model calls one channel turn may make (tool loop bound). */
  maxAgentSteps: number;
  replyPolicy: ReplyPolicy;
  /** Estimated tokens a channel may spend on the model per UTC day; 0 = unlimited. */
  dailyTokenBudget: number;
  /**
   * `tokens`: the budget counts every input and output token. `billed`: input counts as the
   * prompt cache bills it (a cache read 0.1×, a write 1.25× or 2×), output as is.
   */
  budgetUnit: BudgetUnit;
  /** Show replies while they are generated (posted, then edited); false posts them when complete. */
  streamReplies: boolean;
  /** Images attached to a message the bot answers reach the model as images. */
  vision: boolean;
  /** Images of one message the model sees at most; the rest stay placeholders. */
  maxImagesPerMessage: number;
  /** Text files attached to a message the bot answers are inlined up to this many characters. */
  maxAttachmentChars: number;
  compaction: CompactionSettings;
  branch: BranchSettings;
  worker: WorkerSettings;
}

/** `[llm]` */
export interface LlmSettings {
  /** Model id; empty means no model is configured (extractive summaries, no replies). */
  model: string;
  /** Any Anthropic-compatible endpoint; empty = the SDK's default. */
  baseUrl: string;
  /** Name of the environment variable that holds the API key (never the key itself). */
  apiKeyEnv: string;
  timeoutMs: number;
  maxRetries: number;
  /** Simultaneous model calls across all channels. */
  maxConcurrentCalls: number;
  /** Lifetime of the prompt-cache breakpoints every request carries; `off` sends none. */
  promptCache: PromptCacheSetting;
  /** Shortest prefix worth a breakpoint (tokens); 0 = the model's own minimum (`CACHE_MIN_TOKENS`). */
  cacheMinTokens: number;
  /** Price of a million plain input tokens; 0 = unknown (cost is shown in tokens). */
  priceInputPerMtok: number;
  /** Price of a million output tokens; 0 = unknown. */
  priceOutputPerMtok: number;
}

/** `[memory.http]`: any OpenAI-compatible /v1/embeddings endpoint. */
export interface HttpEmbedderSettings {
  url: string;
  model: string;
  apiKeyEnv: string;
  dimension: number;
  batchSize: number;
  timeoutMs: number;
  maxRetries: number;
}

/** `[memory]` */
export interface MemorySettings {
  dataDir: string;
  embedder: EmbedderKind;
  /** Dimension of the default hashing embedder. */
  hashDimension: number;
  /** Widest scope a memory is visible in; `channel` keeps each channel (and DM) apart. */
  scope: MemoryScope;
  http: HttpEmbedderSettings;
}

/** `[discord]` */
export interface DiscordSettings {
  tokenEnv: string;
  /** Empty = every guild the bot is in. */
  allowedGuilds: string[];
  /** Empty = every channel; threads inherit their parent's entry. */
  allowedChannels: string[];
  /** Empty = everyone; otherwise a member needs one of these roles. */
  allowedRoles: string[];
  /** Empty = everyone (subject to roles). */
  allowedUsers: string[];
  blockedUsers: string[];
  /** Users allowed to talk to the bot in DMs; empty = DMs off. */
  dmUsers: string[];
  /** Bot accounts whose messages are taken in; others are ignored. */
  allowedBots: string[];
  /** Coalesce a burst of messages into one turn: wait this long after the last one... */
  debounceMs: number;
  /** ...but never longer than this after the first. */
  debounceMaxMs: number;
  /** Turns one user may trigger per minute; 0 = unlimited. */
  userTurnsPerMinute: number;
  /** How long shutdown waits for running turns. */
  shutdownGraceMs: number;
  /** Register slash commands on start. */
  registerCommands: boolean;
  /**
   * After a restart or a gateway session that could not be resumed, the most recently active
   * channels (at most this many; 0 = off) fetch what they missed through REST before answering.
   */
  catchUpChannels: number;
  /** At most this many missed messages fetched per channel (the oldest first, in order). */
  catchUpMessages: number;
}

/** `[runtime]`: how many channels one process keeps in memory. */
export interface RuntimeSettings {
  /** A channel unused this long is unloaded (its state reloads from SQLite on the next message). */
  channelIdleMs: number;
  /** Most channels loaded at once; the least recently used quiet ones are unloaded beyond it. */
  maxLoadedChannels: number;
}

/**
 * `[storage]`: where history, summaries, the archive and memories live. SQLite keeps them in the
 * data dir (one process per data dir); PostgreSQL shares them between processes and machines.
 * Index files stay in each process's data dir either way (they are derived).
 */
export interface StorageSettings {
  backend: 'sqlite' | 'postgres';
  /** Environment variable holding the PostgreSQL connection URL (never the URL itself). */
  urlEnv: string;
  /** PostgreSQL schema holding Magpie's tables (created if missing). */
  schema: string;
  /** PostgreSQL: the server's limit on one statement; the client gives up 1 s later and reconnects. */
  statementTimeoutMs: number;
  /** PostgreSQL: the limit on opening a connection or waiting for a free one. */
  connectTimeoutMs: number;
  /** PostgreSQL: connections in the pool (at least 2: writes outside transactions hold one). */
  poolSize: number;
  /**
   * SQLite: whether a burst's group commits run on a writer thread of their own (`auto`: when
   * the machine has cores to spare for it, see `storage/writer-thread.ts`).
   */
  writerThread: 'auto' | 'on' | 'off';
}

/** `[metrics]` */
export interface MetricsSettings {
  /** `host:port` of the Prometheus and health endpoint; empty = off. */
  listen: string;
  /** Days of compaction log (events and usage samples) kept in SQLite for `status` and `report`. */
  compactionLogDays: number;
  /** At most this many compaction log rows are kept (the newest). */
  compactionLogMaxRows: number;
}

/** `[privacy]` */
export interface PrivacySettings {
  /** After a delete, the bot edits its own Discord replies that quoted the deleted text. */
  editOwnReplies: boolean;
}

/** `[logging]` */
export interface LoggingSettings {
  level: LogLevel;
}

export interface MagpieConfig {
  defaults: ChannelSettings;
  /** Per-channel settings, already merged over `defaults`. */
  channels: Readonly<Record<string, ChannelSettings>>;
  llm: LlmSettings;
  memory: MemorySettings;
  discord: DiscordSettings;
  runtime: RuntimeSettings;
  storage: StorageSettings;
  metrics: MetricsSettings;
  privacy: PrivacySettings;
  logging: LoggingSettings;
}
