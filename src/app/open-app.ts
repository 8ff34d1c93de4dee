import path from 'node:path';
import { systemClock, type Clock } from '../common/clock.js';
import { errorMessage, InputError, MagpieError } from '../common/errors.js';
import { EventStream } from '../common/events.js';
import { LiveConfig } from '../config/live-config.js';
import type { MagpieConfig } from '../config/types.js';
import { ChannelRuntime } from '../channel/index.js';
import { ErasurePoller, ErasureRequests } from '../privacy/erasure-requests.js';
import { CompactionLog } from '../compaction-log/index.js';
import { createExtractiveSummarizer } from '../compaction/extractive-summarizer.js';
import { createLlmSummarizer } from '../compaction/llm-summarizer.js';
import { SUGGESTED_MODEL } from '../llm/anthropic-model.js';
import { createAnthropicModel, definitionsOf, limitConcurrency, observeModel, type ChatModel, type ModelPurpose } from '../llm/index.js';
import type { ToolHandler } from '../llm/tool.js';
import { createMemoryTools, openMemoryStore } from '../memory/index.js';
import { openChannelViews } from '../privacy/channel-views.js';
import type { MemoryStore } from '../memory/types.js';
import type { MagpieMetrics } from '../metrics/index.js';
import { timeMemorySearch } from '../metrics/timed-memory.js';
import type { SqlClient } from '../storage/sql-client.js';
import { openStorageForWriting, storageTarget, type OpenedStorage, type StorageConnection, type StorageTarget } from '../storage/open-storage.js';
import { ALL_MIGRATIONS } from './migrations.js';
import { createBranchTool } from '../branch/index.js';
import { createChannelHistoryTool, createSpawnWorkerTool, WorkerManager } from '../worker/index.js';
import { StorageHealth } from '../storage/storage-health.js';
import { wantsWriterThread } from '../storage/writer-thread.js';
import { ChannelResponder } from './channel-responder.js';
import { openChangeFeed } from './change-feed.js';
import { DailyTokenBudget } from './cost-guards.js';

export interface OpenAppOptions {
  config: LiveConfig | MagpieConfig;
  /** The file `config` was read from (named where users see settings, e.g. `/persona`). */
  configFile?: string;
  /** Overrides `[memory] data_dir`. */
  dataDir?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  events?: EventStream;
  clock?: Clock;
  /** Names this process in the data dir's writer lock (what a second writer is told). */
  command?: string;
  /** On a shared PostgreSQL store: what this process writes (one key per shard); default all. */
  writerKey?: string;
  /** Counts model calls by purpose, messages, usage checks and searches; gauges read the app. */
  metrics?: MagpieMetrics;
  /**
   * Whether this process records compaction events and usage in the compaction log and prunes
   * it (default true: the bot). A one-off command leaves the log as it found it: its rows would
   * carry today's time into a log of another period (a replayed data dir).
   */
  compactionLog?: boolean;
}

/** Everything a running Magpie needs, opened from one config, closed in one call. */
export interface MagpieApp {
  config: LiveConfig;
  events: EventStream;
  dataDir: string;
  /** Where history and memories live (the data dir, or PostgreSQL). */
  target: StorageTarget;
  db: SqlClient;
  memory: MemoryStore;
  /** Undefined when no model is configured or usable; `modelProblem` says why. */
  model: ChatModel | undefined;
  /**
   * The same model, its calls counted under `purpose` in the metrics (one shared concurrency
   * limit). Branches and workers take theirs here: `app.modelFor('worker')`.
   */
  modelFor(purpose: ModelPurpose): ChatModel | undefined;
  modelProblem: MagpieError | undefined;
  tools: ToolHandler[];
  runtime: ChannelRuntime;
  responder: ChannelResponder;
  /** Background workers (`spawn_worker`, `/tasks`). */
  workers: WorkerManager;
  /** Whether the data dir takes writes now (readiness): false after a failed write until one succeeds. */
  storage: StorageHealth;
  /** On PostgreSQL, the connection's state and the writer lock (`/readyz`, `/healthz`). */
  connection: StorageConnection | undefined;
  /** Stops the runtime (in-flight compactions are not applied), then memory, then the database. */
  close(): Promise<void>;
}

/**
 * Opens the database, memory, the model (capped at `[llm] max_concurrent_calls` simultaneous
 * calls shared by replies and compaction workers), the channel runtime and the responder.
 * A missing model is not an error here: callers decide whether to run without one.
 */
export async function openApp(options: OpenAppOptions): Promise<MagpieApp> {
  const config = options.config instanceof LiveConfig ? options.config : new LiveConfig(options.config, options.configFile ? { file: options.configFile } : {});
  const env = options.env ?? process.env;
  const current = config.current();
  const events = options.events ?? new EventStream();
  const clock = options.clock ?? systemClock;
  const dataDir = path.resolve(options.cwd ?? process.cwd(), options.dataDir ?? current.memory.dataDir);

  let model: ChatModel | undefined;
  let modelProblem: MagpieError | undefined;
  if (current.llm.model.trim() === '') {
    modelProblem = new InputError('no model is configured', { context: { key: 'llm.model' }, hint: MODEL_HINT });
  } else {
    try {
      model = limitConcurrency(createAnthropicModel(current.llm, { env }), current.llm.maxConcurrentCalls);
    } catch (error) {
      if (!(error instanceof MagpieError)) throw error;
      modelProblem = error;
    }
  }

  const metrics = options.metrics;
  const shared = model;
  // Each call names its purpose (agent turn, summarizer, branch, worker); `modelFor` sets the
  // purpose of calls that do not.
  const modelFor = (purpose: ModelPurpose): ChatModel | undefined =>
    shared && metrics ? observeModel(shared, purpose, metrics.modelObserver) : shared;
  model = modelFor('channel');

  // One writer per data dir (per shard on PostgreSQL): a second one is refused here, naming the holder.
  const target = storageTarget(current, dataDir, env);
  const writable = await openStorageForWriting(target, ALL_MIGRATIONS, {
    command: options.command ?? 'magpie',
    ...(options.writerKey ? { writerKey: options.writerKey } : {}),
    checkpointInBackground: true,
    onCheckpointFailure: (error) => events.emit({ type: 'wal_checkpoint_failed', error }),
    commitInBackground: wantsWriterThread(current.storage.writerThread),
    onWriterThreadFailure: (error) => events.emit({ type: 'writer_thread_failed', error }),
    // A large store's upgrade may take minutes: the log says what the start is waiting for.
    onSchemaStep: (report) =>
      events.emit(
        report.phase === 'started'
          ? { type: 'schema_migration_started', backend: target.backend, steps: report.steps.length, first_step: report.steps[0], last_step: report.steps.at(-1) }
          : { type: 'schema_migration_finished', backend: target.backend, steps: report.steps.length, duration_ms: report.durationMs },
      ),
  });
  const db = writable.db;
  let memory: MemoryStore;
  let budget: DailyTokenBudget;
  // What other processes on the same PostgreSQL schema change, and what this one tells them.
  const changes = await openChangeFeed(target, db, writable.close, options.command ?? 'magpie');
  try {
    // Index loads and rebuilds reach the log like every other event.
    const views = await openChannelViews(db);
    memory = await openMemoryStore({ db, dataDir, settings: current.memory, env, clock, events, ...(views ? { views } : {}) });
    // Kept in the database: a restart does not forgive the day's spending.
    budget = await DailyTokenBudget.open(clock, db, (error) => events.emit({ type: 'token_budget_write_failed', error: errorMessage(error) }));
  } catch (error) {
    await changes.close();
    await writable.close();
    throw error;
  }
  const store = memory;
  if (metrics) memory = timeMemorySearch(memory, metrics.memorySearchDuration);
  const memoryTools = createMemoryTools(memory);
  const tools: ToolHandler[] = [memoryTools.memorySearch, memoryTools.memorySave];
  const settingsFor = (channelId: string, parentId?: string) => config.settingsFor(channelId, parentId);
  // Branches and workers exist only with a model; they count against the same budget and
  // share the model's concurrency cap.
  let workers: WorkerManager | undefined;
  if (model) {
    tools.push(
      createBranchTool({
        model,
        liveContext: (channelId) => runtime.liveContext(channelId),
        settingsFor,
        tools: [memoryTools.memorySearch, memoryTools.memorySave],
        budget,
        events,
        calibration: (channelId) => runtime.requestFactors(channelId),
      }),
      createSpawnWorkerTool({ spawn: (request) => workers!.spawn(request) }),
    );
  }
  // What compaction did stays in SQLite for `magpie status` and `magpie report`.
  const recording = options.compactionLog ?? true;
  const compactionLog: CompactionLog | undefined = recording
    ? new CompactionLog({
        db,
        clock,
        events,
        retentionDays: () => config.current().metrics.compactionLogDays,
        maxRows: () => config.current().metrics.compactionLogMaxRows,
        positionOf: (channelId): number => runtime.archivedCountIfLoaded(channelId),
        flushEveryMs: 10_000,
      })
    : undefined;
  compactionLog?.attach(events);
  const locks = writable.channelLocks;
  const runtime: ChannelRuntime = new ChannelRuntime({
    ...(compactionLog ? { usageObserver: compactionLog } : {}),
    db,
    ...(locks ? { locks } : {}),
    memory,
    config,
    events,
    clock,
    summarizer: model ? createLlmSummarizer({ model: modelFor('compaction')!, memoryTools }) : createExtractiveSummarizer(),
    // The same array the agent turns pass: the definitions are counted once per configuration.
    toolDefinitions: definitionsOf(tools),
    changes,
    ...(metrics
      ? {
          observer: {
            messageIngested: () => metrics.messagesIngested.inc(),
            usageChecked: (usage: number) => metrics.contextUsage.observe(usage),
          },
        }
      : {}),
  });
  try {
    // Stored personas are in memory before the first request is built (on a network store the
    // read takes a round trip).
    await runtime.personas.ready;
  } catch (error) {
    await runtime.close();
    await memory.close();
    await changes.close();
    await writable.close();
    throw error;
  }
  metrics?.attachSources({ channelsLoaded: () => runtime.loadedChannels, memoryStats: () => store.stats() });
  const responder = new ChannelResponder({ runtime, model, tools, config, events, clock, budget });
  workers = new WorkerManager({
    db,
    runtime,
    model,
    tools: [memoryTools.memorySearch, memoryTools.memorySave, createChannelHistoryTool(db)],
    settingsFor,
    budget,
    events,
    identity: () => responder.identity,
    calibration: (channelId) => runtime.requestFactors(channelId),
    clock,
  });
  // Workers that were running when the process stopped are reported as interrupted, once.
  await workers.recoverInterrupted();
  const workerManager = workers;
  let closed = false;
  const storage = new StorageHealth({ dataDir, events });
  // The connection's ups and downs, and a writer lock lost for good, reach the log and readiness.
  const unwatch = watchConnection(writable, storage, events);
  // The bot applies erasures an operator asks for beside it (`magpie memory forget`).
  const erasures = recording ? new ErasurePoller(new ErasureRequests(db), runtime, events, undefined, changes) : undefined;
  return {
    config,
    events,
    dataDir,
    target,
    db,
    memory,
    model,
    modelFor,
    modelProblem,
    tools,
    runtime,
    responder,
    workers: workerManager,
    storage,
    connection: writable.connection,
    async close() {
      if (closed) return;
      closed = true;
      // Nothing below waits for a writer lock that is away: it is about to be released.
      writable.connection?.beginClose();
      try {
        await erasures?.close();
        await workerManager.close();
        await runtime.close();
        await compactionLog?.close();
        await budget.settled();
        await memory.close();
      } finally {
        unwatch();
        await changes.close();
        await writable.close();
      }
    },
  };
}

/**
 * Emits `storage_connection_lost` when the PostgreSQL pool is reconnecting or down,
 * `storage_connection_restored` when it answers again, and
 * `storage_writer_lost` (an error: this process stops writing) when another process took the
 * writer lock while the connection was lost; the latter also makes storage unhealthy for good.
 */
function watchConnection(writable: OpenedStorage, storage: StorageHealth, events: EventStream): () => void {
  const connection = writable.connection;
  if (!connection) return () => undefined;
  const offHealth = connection.onHealthChange((health) => {
    events.emit({
      type: health.state === 'up' ? 'storage_connection_restored' : 'storage_connection_lost',
      connection: 'pool',
      state: health.state,
      consecutive_failures: health.consecutiveFailures,
      ...(health.lastErrorCode ? { code: health.lastErrorCode } : {}),
      ...(health.lastError ? { error: health.lastError } : {}),
    });
  });
  // The lock session is a connection of its own: while it is away, writes wait (see open-postgres).
  let locksAway = false;
  const offLocks = connection.onLockSessionChange((state, error) => {
    if (state === 'reconnecting' && !locksAway) {
      locksAway = true;
      events.emit({ type: 'storage_connection_lost', connection: 'locks', state, ...(error ? { error } : {}) });
    } else if (state === 'up' && locksAway) {
      locksAway = false;
      events.emit({ type: 'storage_connection_restored', connection: 'locks', state, writer_lock_held: connection.locksHeld() });
    }
  });
  const offLost = writable.onWriterLost?.((key) => {
    const error = new MagpieError('writer_lock_lost', `another process took the writer lock ${key} while this one was reconnecting: this process no longer writes`, {
      context: { key },
      hint: 'stop one of the two processes; restart this one once it may write again',
    });
    events.emit({ type: 'storage_writer_lost', key, error: error.message });
    storage.reportFailure(error);
  });
  return () => {
    offHealth();
    offLocks();
    offLost?.();
  };
}

/** How to give Magpie a model, for people who have none configured. */
export const MODEL_HINT =
  `set ANTHROPIC_API_KEY and [llm] model = "${SUGGESTED_MODEL}" in config.toml, or point [llm] base_url at any ` +
  'Anthropic-compatible server (a local llama.cpp or Ollama) and name its model in [llm] model';
