import { closeSync, createReadStream, existsSync, openSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { HistoryStore } from '../../channel/history-store.js';
import type { IncomingMessage } from '../../context/types.js';
import { ChannelRuntime } from '../../channel/runtime.js';
import { EventStream } from '../../common/events.js';
import { CompactionLog, LOGGED_EVENTS } from '../../compaction-log/index.js';
import { errorMessage, InputError } from '../../common/errors.js';
import { createExtractiveSummarizer } from '../../compaction/extractive-summarizer.js';
import { createLlmSummarizer } from '../../compaction/llm-summarizer.js';
import { replayLines, TranscriptClock } from '../replay-lines.js';
import { LaggedScheduler } from '../../compaction/scheduler.js';
import { LiveConfig } from '../../config/live-config.js';
import { loadConfig } from '../../config/load-config.js';
import type { MagpieConfig } from '../../config/types.js';
import { createAnthropicModel } from '../../llm/anthropic-model.js';
import type { ChatModel } from '../../llm/chat-model.js';
import { observeModel } from '../../llm/observed-model.js';
import { definitionsOf } from '../../llm/tool.js';
import { createMemoryTools, openMemoryStore } from '../../memory/index.js';
import { openChannelViews } from '../../privacy/channel-views.js';
import type { SqlMemoryStore } from '../../memory/sql-memory-store.js';
import { openStorageForWriting, storageTarget } from '../../storage/open-storage.js';
import { ALL_MIGRATIONS } from '../../app/migrations.js';
import { storageError } from '../../storage/storage-error.js';
import { utf8Lines } from '../utf8-lines.js';
import { EXIT, type CliCommand, type CliIo } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { integerFlag, parseFlags, requireFlag, UsageError } from '../parse-flags.js';
import { createProgress, progressEnabled } from '../progress.js';
import { compareDirs } from './report.js';
import { checkCompareDirs, checkReportOut, reportWritten, writeReport } from './report-output.js';
import { checkContextWindowFlag } from './replay-window.js';
import { archiveCensus, readableSummary, replaySummary, ReplayTally } from './replay-summary.js';
import { costSummary, CostTally, readableCost, replyPricer } from './replay-cost.js';
import { jsonLine } from '../json-output.js';

const USAGE = `Usage: magpie replay TRANSCRIPT.jsonl --data-dir DIR [options]

Feeds a transcript through the channel runtime the bot uses (without replying) and reports what
compaction did. Each line: { "id", "channel", "author", "content", "ts"?, "role"? }. A
transcript of '-' is read from stdin (magpie export --channel ID --out - | magpie replay - ...).

Options:
  --data-dir DIR        where history and memory are written (left behind for 'magpie memory')
  --config FILE         config file (default ./config.toml if present, else defaults)
  --context-window N    override every channel's context window (tokens); like context_window in
                        config check, it must leave the emergency tier room for the system
                        prompt and one message beside max_response_tokens
  --summarizer KIND     extractive (default, offline) or llm (needs [llm] configured)
  --worker-lag N        land each worker's result after N more messages in its channel (default 0)
  --cost-replies        at each line of the bot's (role "assistant"), send the model the request the
                        bot would have sent there and count what it cost (needs [llm]); the
                        transcript's own reply is what is stored
  --json                one JSON event per line, ending with a replay_summary line
  --report FILE.html    also write the HTML tuning report of this data dir ('magpie report')
  --compare DIR         with --report: show another replay's data dir beside this one (repeatable)
  --accept-invalid-utf8
                        replace bytes that are not UTF-8 with U+FFFD (default: such a line
                        is an error)
  -h, --help            show this help

Re-running on the same data dir skips messages already ingested (by id); a line that reuses a
stored id with other text is reported on stderr and counted as a conflict (the stored text is
kept). A bad line stops the replay with exit 1; what came before it is kept. Replay writes the
data dir, so it refuses to run while another writer (the bot, chat, another replay) holds it.
Ctrl-C (or SIGTERM) finishes the current message, prints what was stored and the summary, and
exits 130 (143); a re-run continues where it stopped. Progress (count, rate, ETA) goes to stderr
when it is a terminal.

Comparing two settings on the same transcript:
  magpie replay chat.jsonl --data-dir runs/default
  magpie replay chat.jsonl --data-dir runs/aggressive --config aggressive.toml \\
    --report compare.html --compare runs/default
`;

/**
 * The events printed with --json: every compaction event the runtime emits, and archive failures.
 * `compaction_skipped` is not kept in the compaction log (the report has no use for it), but a
 * replay that hit an emergency with nothing to drop should say so.
 */
const PRINTED_EVENTS: ReadonlySet<string> = new Set([...LOGGED_EVENTS, 'compaction_skipped', 'archive_failed']);

export const replayCommand: CliCommand = {
  name: 'replay',
  summary: COMMAND_SUMMARIES.replay,
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
        report: { type: 'string' },
        compare: { type: 'string', multiple: true },
        'accept-invalid-utf8': { type: 'boolean' },
        'cost-replies': { type: 'boolean' },
      },
      positionals: { min: 1, max: 1 },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    // `-` is stdin, as for `memory search --queries -`: `magpie export --out - | magpie replay -`.
    const transcript = parsed.positionals[0] === '-' ? '-' : resolve(io.cwd, parsed.positionals[0]!);
    const dataDir = resolve(io.cwd, requireFlag(parsed.values['data-dir'], '--data-dir', USAGE));
    const contextWindow = integerFlag(parsed.values['context-window'], '--context-window', USAGE, { min: 100 });
    const workerLag = integerFlag(parsed.values['worker-lag'], '--worker-lag', USAGE, { min: 0 }) ?? 0;
    const summarizerKind = parsed.values.summarizer ?? 'extractive';
    if (summarizerKind !== 'extractive' && summarizerKind !== 'llm') {
      throw new UsageError(`--summarizer must be 'extractive' or 'llm', got '${summarizerKind}'`, USAGE);
    }
    const report = parsed.values.report;
    if (report !== undefined && report.trim() === '') throw new UsageError('--report needs a file name', USAGE);
    if (parsed.values.compare !== undefined && report === undefined) throw new UsageError('--compare goes with --report FILE.html', USAGE);
    if (transcript !== '-') checkTranscript(transcript);
    // Everything that could refuse the report is checked before the data dir is written.
    if (report !== undefined) checkReportOut(report, io.cwd, '--report');
    const compare = checkCompareDirs(compareDirs(parsed.values.compare, USAGE, 1), io.cwd);
    const loaded = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env }).config;
    if (contextWindow !== undefined) checkContextWindowFlag(loaded, contextWindow, USAGE);
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
      costReplies: parsed.values['cost-replies'] === true,
      ...(report === undefined ? {} : { report: { out: report, compare } }),
    });
  },
};

/**
 * One replay, as the command runs it. Benchmarks call it in-process with their own `clock`, so
 * that a fake model server ages its prompt cache on the transcript's time.
 */
export async function replay(options: {
  io: CliIo;
  transcript: string;
  dataDir: string;
  config: MagpieConfig;
  summarizerKind: 'extractive' | 'llm';
  workerLag: number;
  json: boolean;
  acceptInvalidUtf8: boolean;
  costReplies?: boolean;
  report?: { out: string; compare: string[] };
  clock?: TranscriptClock;
}): Promise<number> {
  const { io, config } = options;
  const costs = new CostTally();
  // The model is checked before the data dir is written: a replay refused for want of one
  // leaves no database, index or lock behind (nor a schema on PostgreSQL).
  const model =
    options.summarizerKind === 'llm' || options.costReplies ? observeModel(modelOf(config, io.env, options.costReplies ? '--cost-replies' : '--summarizer llm'), 'compaction', costs) : undefined;
  const target = storageTarget(config, options.dataDir, options.io.env);
  // On PostgreSQL the rows go to the schema of [storage], whatever --data-dir says.
  const storedIn = target.backend === 'postgres' ? `PostgreSQL schema ${target.schema}` : options.dataDir;
  let writable;
  try {
    writable = await openStorageForWriting(target, ALL_MIGRATIONS, {
      command: 'magpie replay',
      // A replay writes as fast as it can: its checkpoints run beside it, not inside its commits.
      checkpointInBackground: true,
      onCheckpointFailure: (error) => io.stderr.write(`warning: the WAL checkpoint thread failed (${error}); the writer checkpoints on its own\n`),
    });
  } catch (error) {
    throw storageError(options.dataDir, error) ?? error;
  }
  const db = writable.db;
  let memory: SqlMemoryStore | undefined;
  let runtime: ChannelRuntime | undefined;
  let log: CompactionLog | undefined;
  const indexMeter = createProgress({ stream: io.stderr, label: 'vector index', unit: 'vectors', enabled: progressEnabled(io.stderr, io.env) });
  // Ctrl-C / SIGTERM: finish the message being ingested, then stop and report; a second one
  // ends the process at once.
  let stopSignal: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopSignal !== undefined) process.exit(exitCodeFor(signal));
    stopSignal = signal;
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    // Memories saved by workers carry the transcript's time too, so two runs write the same rows.
    const clock = options.clock ?? new TranscriptClock();
    const views = await openChannelViews(db);
    memory = await openMemoryStore({
      db,
      ...(views ? { views } : {}),
      dataDir: options.dataDir,
      settings: { ...config.memory, dataDir: options.dataDir },
      env: io.env,
      clock,
      // The vector index is built at the end (and saved on close): a long wait worth showing.
      onIndexProgress: (progress) => indexMeter.update(progress.indexed, { fraction: progress.total > 0 ? progress.indexed / progress.total : 1 }),
    });
    const memoryTools = createMemoryTools(memory);
    const summarizer = options.summarizerKind === 'llm' ? createLlmSummarizer({ model: model!, memoryTools }) : createExtractiveSummarizer();
    const events = new EventStream();
    const tally = new ReplayTally();
    // The whole replay is kept (no retention: the report covers the transcript, whatever its dates).
    log = new CompactionLog({ db, clock, events, batchSize: 512 });
    log.attach(events);
    events.subscribe((event) => {
      tally.count(event);
      if (options.json && PRINTED_EVENTS.has(event.type)) io.stdout.write(jsonLine(event));
    });
    const locks = writable.channelLocks;
    runtime = new ChannelRuntime({
      db,
      ...(locks ? { locks } : {}),
      memory,
      config: new LiveConfig(config),
      events,
      summarizer,
      clock,
      scheduler: new LaggedScheduler(options.workerLag),
      usageObserver: log,
    });
    const started = performance.now();
    let invalidUtf8Lines = 0;
    const lines = utf8Lines(options.transcript === '-' ? io.stdin : createReadStream(options.transcript), {
      acceptInvalid: options.acceptInvalidUtf8,
      onInvalid: (line) => {
        invalidUtf8Lines += 1;
        io.stderr.write(`magpie replay: line ${line}: not valid UTF-8; bad bytes replaced with U+FFFD\n`);
      },
    });
    const history = new HistoryStore(db);
    // Read from stdin, the size is not known: the count and rate are shown without a percentage.
    const size = options.transcript === '-' ? undefined : statSync(options.transcript).size;
    const meter = createProgress({ stream: io.stderr, label: 'replay', unit: 'messages', enabled: progressEnabled(io.stderr, io.env) });
    let bytes = 0;
    const pricer = options.costReplies
      ? replyPricer({ runtime, model: model!, tools: definitionsOf([memoryTools.memorySearch, memoryTools.memorySave]), maxTokensFor: (channelId) => config.channels[channelId]?.maxResponseTokens ?? config.defaults.maxResponseTokens, events })
      : undefined;
    // A gap in the transcript longer than the prompt cache's lifetime is when the bot's sweep
    // would have compacted a channel with a cold cache: done here at that moment of the gap.
    const replayRuntime = runtime;
    const coldGap = async (message: IncomingMessage): Promise<void> => {
      const coldAt = await replayRuntime.cacheColdAt(message.channelId);
      if (coldAt === undefined || message.createdAt <= coldAt) return;
      clock.current = coldAt + 1;
      const landed = replayRuntime.compactIfCold(message.channelId, coldAt + 1);
      // Lag 0: the summary lands in the gap (the scheduler would hold it until the next
      // message). With --worker-lag it lands only after more messages, as any other, and a
      // failure is the compaction's own event.
      if (options.workerLag === 0) await landInGap(replayRuntime, landed);
      else void landed.catch(() => undefined);
      clock.current = message.createdAt;
    };
    const progress = await replayLines({
      lines,
      runtime,
      clock,
      beforeIngest: async (message) => {
        await coldGap(message);
        await pricer?.(message);
      },
      lastStoredTime: (channelId) => history.lastMessageTime(channelId),
      onConflict: (conflict) =>
        io.stderr.write(
          `magpie replay: line ${conflict.line}: id ${JSON.stringify(conflict.messageId)} in channel ${JSON.stringify(conflict.channelId)} ` +
            'is already stored with other text; the stored text is kept\n',
        ),
      shouldStop: () => stopSignal !== undefined,
      onLine: (counts, raw) => {
        bytes += Buffer.byteLength(raw) + 1;
        meter.update(counts.messages + counts.duplicates, size === undefined ? {} : { fraction: size > 0 ? bytes / size : 1 });
      },
    });
    meter.finish();
    let failure = progress.failure;
    // Interrupted: held worker results are not waited for (a restart would not apply them either).
    if (failure === undefined && stopSignal === undefined) {
      try {
        await runtime.flushCompactions();
        // Leaves complete index files behind, so readers need not rebuild them.
        await memory.warmIndexes([...progress.channels]);
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
    await log.close();
    const census = await archiveCensus(db, progress.channels);
    const summary = {
      ...replaySummary(tally, progress, census, {
        summarizerKind: options.summarizerKind,
        workerLag: options.workerLag,
        durationMs,
        ...(stopSignal === undefined ? {} : { interrupted: stopSignal }),
      }),
      ...(invalidUtf8Lines > 0 ? { invalid_utf8_lines: invalidUtf8Lines } : {}),
      ...(costs.byPurpose.size > 0 ? { cost: costSummary(costs, progress.messages, config.llm) } : {}),
    };
    if (stopSignal !== undefined) {
      io.stderr.write(
        `magpie replay: stopped by ${stopSignal} after line ${progress.lines}: ${progress.messages} new messages stored in ${storedIn}` +
          (progress.duplicates > 0 ? ` (${progress.duplicates} were already there)` : '') +
          '.\n  Run the same command again to continue where it stopped: messages already stored are skipped by id.\n',
      );
    }
    if (target.backend === 'postgres' && progress.duplicates > 0) {
      // Two runs meant to compare settings in two data dirs would otherwise meet in one schema,
      // the second finding every line stored and compacting nothing.
      io.stderr.write(
        `note: ${progress.duplicates} lines were already stored in ${storedIn}: on PostgreSQL every --data-dir shares the schema of [storage] (the data dir keeps only index files)\n` +
          '  to compare settings, give each replay a schema of its own ([storage] schema, or MAGPIE_STORAGE_SCHEMA)\n',
      );
    }
    if (options.json) io.stdout.write(jsonLine(summary));
    else io.stdout.write(readableSummary(summary) + (summary.cost ? `${readableCost(summary.cost).join('\n')}\n` : ''));
    if (options.report) {
      const runs = await writeReport({ sources: [{ dataDir: options.dataDir, db }, ...options.report.compare.map((dir) => ({ dataDir: dir }))], out: options.report.out, io });
      if (options.report.out !== '-') io.stderr.write(reportWritten(resolve(io.cwd, options.report.out), runs));
    }
    if (failure !== undefined) {
      const problem = storageError(options.dataDir, failure);
      if (!problem) throw failure;
      const kept = progress.messages + progress.duplicates + progress.conflicts;
      io.stderr.write(`magpie replay: ${problem.render()}\n  (the ${kept} lines before it are stored in ${storedIn}; run the same replay again to go on)\n`);
      return EXIT.failure;
    }
    if (progress.error) {
      const kept = progress.messages + progress.duplicates + progress.conflicts;
      io.stderr.write(`magpie replay: ${progress.error.render()}\n  (the ${kept} messages before it are in ${storedIn})\n`);
      return EXIT.failure;
    }
    return stopSignal === undefined ? EXIT.ok : exitCodeFor(stopSignal);
  } catch (error) {
    throw storageError(options.dataDir, error) ?? error;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (runtime) await runtime.close().catch(() => {});
    await log?.close();
    if (memory) await memory.close().catch(() => {});
    indexMeter.finish();
    await writable.close();
  }
}

/**
 * The transcript must be a file this process can read: found out now, before the data dir is
 * created, rather than as a raw EACCES once the replay has begun.
 */
function checkTranscript(transcript: string): void {
  if (!existsSync(transcript)) throw new InputError(`transcript not found: ${transcript}`, { hint: "give a JSONL file, or '-' to read the transcript from stdin" });
  if (!statSync(transcript).isFile()) throw new InputError(`transcript is not a file: ${transcript}`);
  try {
    closeSync(openSync(transcript, 'r'));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new InputError(`cannot read the transcript ${transcript}: ${code === 'EACCES' || code === 'EPERM' ? 'permission denied' : errorMessage(error)}`, {
      hint: 'give this user read access to the file (ls -l shows who may read it)',
    });
  }
}

/**
 * Waits until a compaction started in a gap has landed. It reaches the scheduler only once its
 * channel is at hand (after an await), and the scheduler holds it until flushed: so flush, and
 * flush again while it has not settled.
 */
async function landInGap(runtime: ChannelRuntime, landed: Promise<unknown>): Promise<void> {
  let settled = false;
  const outcome = landed.finally(() => {
    settled = true;
  });
  // Its failure surfaces at the last await below, not as an unhandled rejection meanwhile.
  void outcome.catch(() => undefined);
  while (!settled) {
    await runtime.flushCompactions();
    await Promise.race([outcome, new Promise((resolve) => setImmediate(resolve))]);
  }
  await outcome;
}

/** The shell's convention: 128 + the signal's number. */
function exitCodeFor(signal: NodeJS.Signals): number {
  return signal === 'SIGTERM' ? 143 : 130;
}

function modelOf(config: MagpieConfig, env: NodeJS.ProcessEnv, flag: string): ChatModel {
  if (config.llm.model.trim() === '') {
    throw new InputError(`${flag} needs a model: [llm] model is empty`, {
      hint: 'set [llm] model (and its API key variable) in the config, or use --summarizer extractive without --cost-replies',
    });
  }
  return createAnthropicModel(config.llm, { env });
}

function withContextWindow(config: MagpieConfig, contextWindow: number | undefined): MagpieConfig {
  if (contextWindow === undefined) return config;
  const channels = Object.fromEntries(
    Object.entries(config.channels).map(([id, settings]) => [id, { ...settings, contextWindow }]),
  );
  return { ...config, defaults: { ...config.defaults, contextWindow }, channels };
}
