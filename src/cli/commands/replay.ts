import { createReadStream, existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { ChannelRuntime } from '../../channel/runtime.js';
import { EventStream, type MagpieEvent } from '../../common/events.js';
import { InputError } from '../../common/errors.js';
import { createExtractiveSummarizer } from '../../compaction/extractive-summarizer.js';
import { createLlmSummarizer } from '../../compaction/llm-summarizer.js';
import { replayLines, TranscriptClock, type ReplayProgress } from '../../compaction/replay.js';
import { LaggedScheduler } from '../../compaction/scheduler.js';
import type { Summarizer } from '../../compaction/summarizer.js';
import { LiveConfig } from '../../config/live-config.js';
import { loadConfig } from '../../config/load-config.js';
import type { MagpieConfig } from '../../config/types.js';
import { createAnthropicModel } from '../../llm/anthropic-model.js';
import { createMemoryTools, openMemoryStore } from '../../memory/index.js';
import type { SqliteMemoryStore } from '../../memory/sqlite-memory-store.js';
import type { MemoryStore } from '../../memory/types.js';
import { openDataDirForWriting } from '../../storage/data-dir.js';
import { ALL_MIGRATIONS } from '../../storage/migrations.js';
import { storageError } from '../../storage/storage-error.js';
import { utf8Lines } from '../utf8-lines.js';
import { EXIT, type CliCommand, type CliIo } from '../command.js';
import { integerFlag, parseFlags, requireFlag, UsageError } from '../parse-flags.js';

const USAGE = `Usage: magpie replay TRANSCRIPT.jsonl --data-dir DIR [options]

Feeds a transcript through the channel runtime the bot uses (without replying) and reports what
compaction did. Each line: { "id", "channel", "author", "content", "ts"?, "role"? }.

Options:
  --data-dir DIR        where history and memory are written (left behind for 'magpie memory')
  --config FILE         config file (default ./config.toml if present, else defaults)
  --context-window N    override every channel's context window (tokens)
  --summarizer KIND     extractive (default, offline) or llm (needs [llm] configured)
  --worker-lag N        land each worker's result after N more messages in its channel (default 0)
  --json                one JSON event per line, ending with a replay_summary line
  --accept-invalid-utf8 replace bytes that are not UTF-8 with U+FFFD (default: such a line is an error)
  -h, --help            show this help

Re-running on the same data dir skips messages already ingested (by id); a line that reuses a
stored id with other text is reported on stderr and counted as a conflict (the stored text is
kept). A bad line stops the replay with exit 1; what came before it is kept. Replay writes the
data dir, so it refuses to run while another writer (the bot, chat, another replay) holds it.
`;

/** The events printed with --json (every compaction event the runtime emits). */
const PRINTED_EVENTS = new Set([
  'compaction_triggered',
  'compaction_started',
  'compaction_completed',
  'compaction_failed',
  'compaction_replanned',
  'emergency_truncation',
  'archive_failed',
]);

export const replayCommand: CliCommand = {
  name: 'replay',
  summary: 'feed a JSONL transcript through the channel runtime and report compaction',
  async run(argv, io) {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: {
        'data-dir': { type: 'string' },
        config: { type: 'string' },
        'context-window': { type: 'string' },
        summarizer: { type: 'string' },
        'worker-lag': { type: 'string' },
        json: { type: 'boolean' },
        'accept-invalid-utf8': { type: 'boolean' },
      },
      positionals: { min: 1, max: 1 },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const transcript = resolve(io.cwd, parsed.positionals[0]!);
    const dataDir = resolve(io.cwd, requireFlag(parsed.values['data-dir'], '--data-dir', USAGE));
    const contextWindow = integerFlag(parsed.values['context-window'], '--context-window', USAGE, { min: 100 });
    const workerLag = integerFlag(parsed.values['worker-lag'], '--worker-lag', USAGE, { min: 0 }) ?? 0;
    const summarizerKind = parsed.values.summarizer ?? 'extractive';
    if (summarizerKind !== 'extractive' && summarizerKind !== 'llm') {
      throw new UsageError(`--summarizer must be 'extractive' or 'llm', got '${summarizerKind}'`, USAGE);
    }
    if (!existsSync(transcript)) throw new InputError(`transcript not found: ${transcript}`);
    if (!statSync(transcript).isFile()) throw new InputError(`transcript is not a file: ${transcript}`);
    const loaded = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env }).config;
    const config = withContextWindow(loaded, contextWindow);
    return replay({
      io,
      transcript,
      dataDir,
      config,
      summarizerKind,
      workerLag,
      json: parsed.values.json === true,
      acceptInvalidUtf8: parsed.values['accept-invalid-utf8'] === true,
    });
  },
};

async function replay(options: {
  io: CliIo;
  transcript: string;
  dataDir: string;
  config: MagpieConfig;
  summarizerKind: 'extractive' | 'llm';
  workerLag: number;
  json: boolean;
  acceptInvalidUtf8: boolean;
}): Promise<number> {
  const { io, config } = options;
  let writable;
  try {
    writable = openDataDirForWriting(options.dataDir, ALL_MIGRATIONS, { command: 'magpie replay' });
  } catch (error) {
    throw storageError(options.dataDir, error) ?? error;
  }
  const db = writable.db;
  let memory: SqliteMemoryStore | undefined;
  let runtime: ChannelRuntime | undefined;
  try {
    // Memories saved by workers carry the transcript's time too, so two runs write the same rows.
    const clock = new TranscriptClock();
    memory = await openMemoryStore({ db, dataDir: options.dataDir, settings: { ...config.memory, dataDir: options.dataDir }, env: io.env, clock });
    const summarizer = makeSummarizer(options.summarizerKind, config, memory, io.env);
    const events = new EventStream();
    const tally = new Tally();
    events.subscribe((event) => {
      tally.count(event);
      if (options.json && PRINTED_EVENTS.has(event.type)) io.stdout.write(`${JSON.stringify(event)}\n`);
    });
    runtime = new ChannelRuntime({
      db,
      memory,
      config: new LiveConfig(config),
      events,
      summarizer,
      clock,
      scheduler: new LaggedScheduler(options.workerLag),
    });
    const started = performance.now();
    let invalidUtf8Lines = 0;
    const lines = utf8Lines(createReadStream(options.transcript), {
      acceptInvalid: options.acceptInvalidUtf8,
      onInvalid: (line) => {
        invalidUtf8Lines += 1;
        io.stderr.write(`magpie replay: line ${line}: not valid UTF-8; bad bytes replaced with U+FFFD\n`);
      },
    });
    const progress = await replayLines({
      lines,
      runtime,
      clock,
      onConflict: (conflict) =>
        io.stderr.write(
          `magpie replay: line ${conflict.line}: id ${JSON.stringify(conflict.messageId)} in channel ${JSON.stringify(conflict.channelId)} ` +
            'is already stored with other text; the stored text is kept\n',
        ),
    });
    let failure = progress.failure;
    if (failure === undefined) {
      try {
        await runtime.flushCompactions();
        // Leaves complete index files behind, so readers need not rebuild them.
        memory.warmIndexes([...progress.channels]);
      } catch (error) {
        failure = error;
      }
    }
    const durationMs = performance.now() - started;
    try {
      await runtime.close();
    } catch (error) {
      failure ??= error;
    }
    runtime = undefined;
    const summary = { ...tally.summary(progress, durationMs, options), ...(invalidUtf8Lines > 0 ? { invalid_utf8_lines: invalidUtf8Lines } : {}) };
    if (options.json) io.stdout.write(`${JSON.stringify(summary)}\n`);
    else io.stdout.write(readable(summary));
    if (failure !== undefined) {
      const problem = storageError(options.dataDir, failure);
      if (!problem) throw failure;
      const kept = progress.messages + progress.duplicates + progress.conflicts;
      io.stderr.write(`magpie replay: ${problem.render()}\n  (the ${kept} lines before it are stored in ${options.dataDir}; run the same replay again to go on)\n`);
      return EXIT.failure;
    }
    if (progress.error) {
      const kept = progress.messages + progress.duplicates + progress.conflicts;
      io.stderr.write(`magpie replay: ${progress.error.render()}\n  (the ${kept} messages before it are in ${options.dataDir})\n`);
      return EXIT.failure;
    }
    return EXIT.ok;
  } catch (error) {
    throw storageError(options.dataDir, error) ?? error;
  } finally {
    if (runtime) await runtime.close().catch(() => {});
    if (memory) await memory.close().catch(() => {});
    writable.close();
  }
}

function makeSummarizer(kind: 'extractive' | 'llm', config: MagpieConfig, memory: MemoryStore, env: NodeJS.ProcessEnv): Summarizer {
  if (kind === 'extractive') return createExtractiveSummarizer();
  if (config.llm.model.trim() === '') {
    throw new InputError('--summarizer llm needs a model: [llm] model is empty', {
      hint: 'set [llm] model (and its API key variable) in the config, or use --summarizer extractive',
    });
  }
  return createLlmSummarizer({ model: createAnthropicModel(config.llm, { env }), memoryTools: createMemoryTools(memory) });
}

function withContextWindow(config: MagpieConfig, contextWindow: number | undefined): MagpieConfig {
  if (contextWindow === undefined) return config;
  const channels = Object.fromEntries(
    Object.entries(config.channels).map(([id, settings]) => [id, { ...settings, contextWindow }]),
  );
  return { ...config, defaults: { ...config.defaults, contextWindow }, channels };
}

/** Counts what the events say, for the final summary. */
class Tally {
  tiers = { background: 0, aggressive: 0, emergency: 0 };
  completed = 0;
  failed = 0;
  replanned = 0;
  messagesCompacted = 0;
  messagesTruncated = 0;
  memoriesSaved = 0;

  count(event: MagpieEvent): void {
    if (event.type === 'compaction_triggered') {
      const tier = event.tier as keyof Tally['tiers'];
      if (tier in this.tiers) this.tiers[tier] += 1;
    } else if (event.type === 'compaction_completed') {
      this.completed += 1;
      this.messagesCompacted += Number(event.messages_compacted);
      this.memoriesSaved += Number(event.memories_saved);
    } else if (event.type === 'compaction_failed') {
      this.failed += 1;
    } else if (event.type === 'compaction_replanned') {
      this.replanned += 1;
    } else if (event.type === 'emergency_truncation') {
      this.messagesTruncated += Number(event.messages_dropped);
    }
  }

  summary(progress: ReplayProgress, durationMs: number, options: { summarizerKind: string; workerLag: number }) {
    return {
      type: 'replay_summary',
      messages: progress.messages,
      duplicates: progress.duplicates,
      conflicts: progress.conflicts,
      channels: progress.channels.size,
      tiers: { ...this.tiers },
      compactions_completed: this.completed,
      compactions_failed: this.failed,
      compactions_replanned: this.replanned,
      messages_compacted: this.messagesCompacted,
      messages_truncated: this.messagesTruncated,
      memories_saved: this.memoriesSaved,
      summarizer: options.summarizerKind,
      worker_lag: options.workerLag,
      duration_ms: Math.round(durationMs),
      messages_per_second: Math.round((progress.messages + progress.duplicates) / Math.max(durationMs / 1000, 1e-3)),
      ...(progress.error ? { error: progress.error.message } : {}),
    };
  }
}

function readable(summary: ReturnType<Tally['summary']>): string {
  return [
    `Replayed ${summary.messages} messages in ${summary.channels} channel(s)` +
      (summary.duplicates > 0 ? ` (${summary.duplicates} already present, skipped)` : '') +
      (summary.conflicts > 0 ? ` (${summary.conflicts} reused an id with other text: conflicts, see stderr)` : '') +
      ` in ${(summary.duration_ms / 1000).toFixed(1)} s (${summary.messages_per_second} messages/s).`,
    `Compaction triggered: background ${summary.tiers.background}, aggressive ${summary.tiers.aggressive}, emergency ${summary.tiers.emergency}.`,
    `Compactions completed: ${summary.compactions_completed} (${summary.messages_compacted} messages summarized, ` +
      `${summary.memories_saved} memories saved); failed: ${summary.compactions_failed}; re-planned: ${summary.compactions_replanned}.`,
    `Emergency truncation dropped ${summary.messages_truncated} messages from the live context (all still in the archive).`,
    '',
  ].join('\n');
}
