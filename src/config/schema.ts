/**
 * What each TOML key may hold. Keys are snake_case as written in `config.toml`; the typed
 * config uses the same names in camelCase (`context_window` → `contextWindow`). A test checks
 * that this schema and `DEFAULTS` list exactly the same keys.
 */

export type FieldSpec =
  | { kind: 'integer'; min: number; max?: number; meaning?: string }
  | { kind: 'decimal'; min: number; meaning?: string } // any finite number at or above min
  | { kind: 'fraction' } // a number in (0, 1]
  | { kind: 'unit' } // a number in [0, 1]
  | { kind: 'string'; nonEmpty?: boolean }
  | { kind: 'url'; allowEmpty: boolean }
  | { kind: 'envName'; allowEmpty: boolean }
  | { kind: 'boolean' }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'idList' }
  | { kind: 'listen' } // "host:port" of a local listener, or "" for none
  | { kind: 'schemaName' } // a PostgreSQL schema: a plain identifier of at most 63 characters
  | { kind: 'table'; fields: TableSpec };

export type TableSpec = Readonly<Record<string, FieldSpec>>;

const positive = { kind: 'integer', min: 1 } as const;
const nonNegative = { kind: 'integer', min: 0 } as const;
/**
 * Node timers hold at most 2^31 - 1 ms (about 24.8 days); a longer delay silently fires after
 * 1 ms (and AbortSignal.timeout throws), so a "very long" timeout would act as none at all.
 */
export const MAX_TIMER_MS = 2_147_483_647;
const milliseconds = { kind: 'integer', min: 1, max: MAX_TIMER_MS, meaning: 'milliseconds' } as const;
const nonNegativeMilliseconds = { kind: 'integer', min: 0, max: MAX_TIMER_MS, meaning: 'milliseconds' } as const;

export const COMPACTION_SPEC: TableSpec = {
  background_threshold: { kind: 'fraction' },
  aggressive_threshold: { kind: 'fraction' },
  emergency_threshold: { kind: 'fraction' },
  background_fraction: { kind: 'fraction' },
  aggressive_fraction: { kind: 'fraction' },
  emergency_fraction: { kind: 'fraction' },
  max_worker_turns: positive,
  worker_timeout_ms: milliseconds,
  summary_max_tokens: positive,
  summary_min_tokens: positive,
  rollup_threshold: { kind: 'fraction' },
  fallback_after_failures: positive,
  cold_cache_threshold: { kind: 'unit' },
  min_tokens_freed: nonNegative,
};

export const BRANCH_SPEC: TableSpec = {
  precompact_threshold: { kind: 'fraction' },
  max_overflow_retries: { kind: 'integer', min: 0, max: 10 },
  max_steps: { kind: 'integer', min: 1, max: 100 },
  max_concurrent: { kind: 'integer', min: 1, max: 50 },
  timeout_ms: milliseconds,
  min_response_tokens: positive,
};

export const WORKER_SPEC: TableSpec = {
  turns_per_segment: { kind: 'integer', min: 1, max: 1000 },
  compact_threshold: { kind: 'fraction' },
  max_segments: { kind: 'integer', min: 1, max: 1000 },
  max_concurrent: { kind: 'integer', min: 1, max: 50 },
  timeout_ms: milliseconds,
  min_response_tokens: positive,
};

/** `[defaults]`, and therefore also every `[channels."<id>"]` table. */
export const CHANNEL_SPEC: TableSpec = {
  context_window: positive,
  system_prompt: { kind: 'string' },
  max_response_tokens: positive,
  min_response_tokens: positive,
  max_agent_steps: positive,
  reply_policy: { kind: 'enum', values: ['mention', 'always', 'listen'] },
  daily_token_budget: nonNegative,
  budget_unit: { kind: 'enum', values: ['tokens', 'billed'] },
  stream_replies: { kind: 'boolean' },
  vision: { kind: 'boolean' },
  max_images_per_message: { kind: 'integer', min: 0, max: 20 },
  max_attachment_chars: { kind: 'integer', min: 0, max: 1_000_000 },
  compaction: { kind: 'table', fields: COMPACTION_SPEC },
  branch: { kind: 'table', fields: BRANCH_SPEC },
  worker: { kind: 'table', fields: WORKER_SPEC },
};

export const CONFIG_SPEC: TableSpec = {
  defaults: { kind: 'table', fields: CHANNEL_SPEC },
  llm: {
    kind: 'table',
    fields: {
      model: { kind: 'string' },
      base_url: { kind: 'url', allowEmpty: true },
      api_key_env: { kind: 'envName', allowEmpty: false },
      timeout_ms: milliseconds,
      max_retries: nonNegative,
      max_concurrent_calls: positive,
      prompt_cache: { kind: 'enum', values: ['5m', '1h', 'off'] },
      cache_min_tokens: nonNegative,
      price_input_per_mtok: { kind: 'decimal', min: 0, meaning: 'price per million tokens' },
      price_output_per_mtok: { kind: 'decimal', min: 0, meaning: 'price per million tokens' },
    },
  },
  memory: {
    kind: 'table',
    fields: {
      data_dir: { kind: 'string', nonEmpty: true },
      embedder: { kind: 'enum', values: ['hash', 'http'] },
      hash_dimension: { kind: 'integer', min: 8, max: 65_536 },
      scope: { kind: 'enum', values: ['channel', 'guild', 'global'] },
      http: {
        kind: 'table',
        fields: {
          url: { kind: 'url', allowEmpty: false },
          model: { kind: 'string', nonEmpty: true },
          api_key_env: { kind: 'envName', allowEmpty: true },
          dimension: { kind: 'integer', min: 1, max: 65_536 },
          batch_size: positive,
          timeout_ms: milliseconds,
          max_retries: nonNegative,
        },
      },
    },
  },
  discord: {
    kind: 'table',
    fields: {
      token_env: { kind: 'envName', allowEmpty: false },
      allowed_guilds: { kind: 'idList' },
      allowed_channels: { kind: 'idList' },
      allowed_roles: { kind: 'idList' },
      allowed_users: { kind: 'idList' },
      blocked_users: { kind: 'idList' },
      dm_users: { kind: 'idList' },
      allowed_bots: { kind: 'idList' },
      debounce_ms: nonNegativeMilliseconds,
      debounce_max_ms: nonNegativeMilliseconds,
      user_turns_per_minute: nonNegative,
      shutdown_grace_ms: nonNegativeMilliseconds,
      register_commands: { kind: 'boolean' },
      catch_up_channels: nonNegative,
      catch_up_messages: { kind: 'integer', min: 1, max: 10_000 },
    },
  },
  runtime: {
    kind: 'table',
    fields: {
      channel_idle_ms: milliseconds,
      max_loaded_channels: { kind: 'integer', min: 1, max: 10_000_000 },
    },
  },
  storage: {
    kind: 'table',
    fields: {
      backend: { kind: 'enum', values: ['sqlite', 'postgres'] },
      url_env: { kind: 'envName', allowEmpty: false },
      schema: { kind: 'schemaName' },
      statement_timeout_ms: { kind: 'integer', min: 100, max: 60_000, meaning: 'milliseconds' },
      connect_timeout_ms: { kind: 'integer', min: 100, max: 60_000, meaning: 'milliseconds' },
      pool_size: { kind: 'integer', min: 2, max: 100, meaning: 'connections' },
      writer_thread: { kind: 'enum', values: ['auto', 'on', 'off'] },
    },
  },
  metrics: {
    kind: 'table',
    fields: {
      listen: { kind: 'listen' },
      compaction_log_days: { kind: 'integer', min: 1, max: 36_500, meaning: 'days' },
      compaction_log_max_rows: { kind: 'integer', min: 1_000, max: 1_000_000_000, meaning: 'rows' },
    },
  },
  privacy: {
    kind: 'table',
    fields: {
      edit_own_replies: { kind: 'boolean' },
    },
  },
  logging: {
    kind: 'table',
    fields: {
      level: { kind: 'enum', values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
    },
  },
};

/**
 * Keys that look like a secret written straight into the file. They are refused and the
 * problem points at the key that names an environment variable instead.
 */
export const SECRET_KEY_PATTERN = /^(api_?key|apikey|key|token|bot_token|discord_token|anthropic_api_key|password|secret|auth|authorization|bearer)$/i;

/** Which `*_env` key replaces a secret, per table path. */
export const SECRET_REPLACEMENTS: Readonly<Record<string, { key: string; variable: string }>> = {
  llm: { key: 'api_key_env', variable: 'ANTHROPIC_API_KEY' },
  'memory.http': { key: 'api_key_env', variable: 'EMBEDDINGS_API_KEY' },
  discord: { key: 'token_env', variable: 'DISCORD_TOKEN' },
};

export function snakeToCamel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

export function camelToSnake(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** Every table path of the schema with its keys, for "this key belongs in [x]" hints. */
export function allTablePaths(spec: TableSpec = CONFIG_SPEC, prefix = ''): Array<{ path: string; keys: string[] }> {
  const result = [{ path: prefix, keys: Object.keys(spec) }];
  for (const [key, field] of Object.entries(spec)) {
    if (field.kind === 'table') result.push(...allTablePaths(field.fields, prefix === '' ? key : `${prefix}.${key}`));
  }
  return result;
}
