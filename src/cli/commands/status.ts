import path from 'node:path';
import { channelIdsWithHistory, contextCensus } from '../../channel/census.js';
import { estimateToolTokens } from '../../channel/model-request.js';
import { SUMMARY_HEADER_TOKENS } from '../../context/summary-text.js';
import { usableWindow } from '../../context/calibration.js';
import { estimateTokens } from '../../context/token-estimate.js';
import { readCompactionLog, tallyLog, type CompactionTally } from '../../compaction-log/index.js';
import { LiveConfig } from '../../config/live-config.js';
import { loadConfig } from '../../config/load-config.js';
import { MEMORY_TOOL_DEFINITIONS } from '../../memory/tools.js';
import { listPersonas } from '../../persona/persona-store.js';
import { hasTable } from '../../storage/read-only.js';
import { listStorage, openStorageForReading, storageTarget, type OpenedStorage, type StorageTarget } from '../../storage/open-storage.js';
import { storageError } from '../../storage/storage-error.js';
import { ALL_MIGRATIONS } from '../../app/migrations.js';
import type { SqlClient } from '../../storage/sql-client.js';
import { EXIT, type CliCommand } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { parseFlags } from '../parse-flags.js';
import { readModelUsage } from '../../compaction-log/read-costs.js';
import { jsonLine } from '../json-output.js';
import { terminalSafe } from '../terminal-text.js';

const USAGE = `Usage: magpie status [--data-dir DIR] [--channel ID] [--config FILE] [--json]

Each channel's state: context usage and estimated tokens (counted as the runtime that wrote the
data counted them: the bot with its tool definitions, a replay without; with the window and
thresholds it last used; all from the compaction log, else from the config), live messages,
stacked summaries and truncation markers, archive size, memories, the last compaction and the
compactions of the last 24 hours.
Opens the database read-only: safe beside a running bot.

Options:
  --data-dir DIR  data directory (default: MAGPIE_DATA_DIR, else [memory] data_dir of the config)
  --channel ID    only this channel
  --config FILE   config file (default ./config.toml if present, else defaults)
  --json          one JSON object: { "data_dir", "channels": [...] }
  -h, --help      show this help
`;

const DAY_MS = 86_400_000;

export interface ChannelStatus {
  channel_id: string;
  /** `calibration_factor × estimated_tokens / usable_window`, as the Compactor computes it. */
  usage: number;
  estimated_tokens: number;
  calibration_factor: number;
  context_window: number;
  /** `context_window − max_response_tokens`: what the thresholds apply to. */
  usable_window: number;
  thresholds: { background: number; aggressive: number; emergency: number };
  /** Where window and thresholds come from: the runtime's last check as logged, or the config file. */
  settings_from: 'compaction_log' | 'config';
  live_messages: number;
  live_entries: number;
  summaries: number;
  markers: number;
  archived_messages: number;
  messages_under_summaries: number;
  messages_under_markers: number;
  memories: number;
  last_message_at: string | null;
  last_compaction: { tier: string; at: string; tokens_freed: number; messages: number } | null;
  last_day: { background: number; aggressive: number; emergency: number; manual: number; failed: number };
  /** The channel's newest model request in the compaction log: its size and the prompt cache's share. */
  last_request: { at: string; input_tokens: number; cache_read_tokens: number; cache_write_tokens: number; cached_share: number; billed_input_tokens: number } | null;
  logged: { background: number; aggressive: number; emergency: number; manual: number; failed: number };
}

export const statusCommand: CliCommand = {
  name: 'status',
  summary: COMMAND_SUMMARIES.status,
  async run(argv, io) {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: { 'data-dir': { type: 'string' }, channel: { type: 'string' }, config: { type: 'string' }, json: { type: 'boolean' } },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const { config } = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env });
    const dataDir = path.resolve(io.cwd, parsed.values['data-dir'] ?? config.memory.dataDir);
    // A sharded bot keeps one data dir per shard (SQLite): status reads them all.
    const entries = listStorage(config, dataDir, io.env);
    const targets = entries.length > 0 ? entries.map((entry) => entry.target) : [storageTarget(config, dataDir, io.env)];
    const opened: OpenedStorage[] = [];
    try {
      for (const target of targets) opened.push(await openForStatus(target));
      const channel = parsed.values.channel;
      const known: Array<{ id: string; db: SqlClient }> = [];
      for (const storage of opened) for (const id of await channelIdsWithHistory(storage.db)) known.push({ id, db: storage.db });
      if (channel !== undefined && !known.some((entry) => entry.id === channel)) {
        io.stderr.write(
          `magpie status: no history for channel '${terminalSafe(channel)}' in ${dataDir}` +
            (known.length > 0 ? `; channels with data: ${known.slice(0, 20).map((entry) => terminalSafe(entry.id)).join(', ')}\n` : ' (the data directory has no channels yet)\n'),
        );
        return EXIT.failure;
      }
      // Personas set from chat with /persona live in the data dir, never in config.toml.
      const allPersonas = (await Promise.all(opened.map((storage) => listPersonas(storage.db)))).flat();
      const promptOf = (channelId: string): string | undefined => allPersonas.find((persona) => persona.channelId === channelId)?.prompt;
      const shown = channel === undefined ? known : known.filter((entry) => entry.id === channel);
      const statuses: ChannelStatus[] = [];
      for (const entry of shown) statuses.push(await channelStatus(entry.db, entry.id, new LiveConfig(config), Date.now(), promptOf(entry.id)));
      const personas = allPersonas.filter((persona) => channel === undefined || persona.channelId === channel);
      if (parsed.values.json) {
        const listed = personas.map((persona) => ({ channel_id: persona.channelId, prompt: persona.prompt, set_by: persona.setBy, set_at: new Date(persona.setAt).toISOString() }));
        io.stdout.write(jsonLine({ data_dir: dataDir, channels: statuses, personas: listed }));
      } else {
        io.stdout.write(statusTable(dataDir, statuses));
        for (const persona of personas) {
          // Typed in a channel: shown as the terminal can take it (terminal-text.ts).
          const prompt = persona.prompt.replace(/\s+/g, ' ');
          const shownPrompt = terminalSafe(prompt.length > 80 ? `${prompt.slice(0, 79)}…` : prompt);
          io.stdout.write(`persona of ${terminalSafe(persona.channelId)} (set with /persona by ${terminalSafe(persona.setBy)}, stored in the data dir): ${shownPrompt}\n`);
        }
      }
      return EXIT.ok;
    } catch (error) {
      // A damaged database, a full or failing disk: what it is and what to do, as the memory
      // commands and replay say it.
      throw storageError(dataDir, error) ?? error;
    } finally {
      for (const storage of opened) await storage.close();
    }
  },
};

/** Opens one store read-only; a storage failure names that store (a shard's dir, if sharded). */
async function openForStatus(target: StorageTarget): Promise<OpenedStorage> {
  try {
    return await openStorageForReading(target, ALL_MIGRATIONS, { command: 'magpie status', anyVersion: true });
  } catch (error) {
    throw storageError(target.dataDir, error) ?? error;
  }
}

async function channelStatus(db: SqlClient, channelId: string, config: LiveConfig, now: number, persona: string | undefined): Promise<ChannelStatus> {
  const census = await contextCensus(db, channelId);
  const log = (await readCompactionLog(db, { channelId }))[0];
  // The window and thresholds the runtime last used (hot reloads included, a replay's
  // --context-window too) are in the log; the config file is the fallback.
  const configured = config.settingsFor(channelId);
  const recorded = log?.settings.at(-1)?.values;
  const settings = {
    contextWindow: recorded?.context_window ?? configured.contextWindow,
    maxResponseTokens: recorded?.max_response_tokens ?? configured.maxResponseTokens,
    background: recorded?.background_threshold ?? configured.compaction.backgroundThreshold,
    aggressive: recorded?.aggressive_threshold ?? configured.compaction.aggressiveThreshold,
    emergency: recorded?.emergency_threshold ?? configured.compaction.emergencyThreshold,
  };
  // The runtime's own count: system prompt, tool definitions, the summary header, summaries, live
  // entries. Prompt and tools as that runtime counted them (a replay offers no tools, the bot
  // its own); a log from before they were recorded: the persona or configured prompt and the
  // two memory tools, as the bot had.
  const estimated =
    (recorded?.prompt_tokens ?? estimateTokens(persona ?? configured.systemPrompt)) +
    (recorded?.tool_tokens ?? estimateToolTokens([...MEMORY_TOOL_DEFINITIONS])) +
    (census.summaries + census.markers > 0 ? SUMMARY_HEADER_TOKENS : 0) +
    census.summaryTokens +
    census.liveEntryTokens;
  // The channel's calibration (real tokens per estimated one), as the runtime persisted it.
  const factor = (await hasTable(db, 'history_calibration'))
    ? (((await db.prepare('SELECT factor FROM history_calibration WHERE channel_id = ?').get(channelId)) as { factor: number } | undefined)?.factor ?? 1)
    : 1;
  const usable = usableWindow(settings);
  const all = log ? tallyLog(log) : undefined;
  const lastDay = log ? tallyLog(log, now - DAY_MS) : undefined;
  const memories = (await hasTable(db, 'memory_items'))
    ? ((await db.prepare("SELECT COUNT(*) AS total FROM memory_items WHERE kind = 'memory' AND channel_id = ?").get(channelId)) as { total: number }).total
    : 0;
  return {
    channel_id: channelId,
    usage: Math.round(((factor * estimated) / usable) * 10_000) / 10_000,
    estimated_tokens: estimated,
    calibration_factor: factor,
    context_window: settings.contextWindow,
    usable_window: usable,
    thresholds: { background: settings.background, aggressive: settings.aggressive, emergency: settings.emergency },
    settings_from: recorded ? 'compaction_log' : 'config',
    live_messages: census.liveMessages,
    live_entries: census.liveEntries,
    summaries: census.summaries,
    markers: census.markers,
    archived_messages: census.messages,
    messages_under_summaries: census.underSummaries,
    messages_under_markers: census.underMarkers,
    memories,
    last_message_at: census.lastMessageAt === undefined ? null : new Date(census.lastMessageAt).toISOString(),
    last_compaction: all?.last
      ? { tier: all.last.tier, at: new Date(all.last.at).toISOString(), tokens_freed: all.last.tokensFreed, messages: all.last.messages }
      : await lastFromHistory(db, channelId),
    last_day: tierCounts(lastDay),
    logged: tierCounts(all),
    last_request: await lastRequest(db, channelId),
  };
}

async function lastRequest(db: SqlClient, channelId: string): Promise<ChannelStatus['last_request']> {
  const [last] = await readModelUsage(db, { channelId, last: true });
  if (!last) return null;
  return {
    at: new Date(last.at).toISOString(),
    input_tokens: last.inputTokens,
    cache_read_tokens: last.cacheReadTokens,
    cache_write_tokens: last.cacheWriteTokens,
    cached_share: last.inputTokens > 0 ? Math.round((last.cacheReadTokens / last.inputTokens) * 1000) / 1000 : 0,
    billed_input_tokens: last.billedInputTokens,
  };
}

/** A data dir written before the compaction log: the newest summary or marker still tells when. */
async function lastFromHistory(db: SqlClient, channelId: string): Promise<ChannelStatus['last_compaction']> {
  const row = (await db
    .prepare('SELECT kind, created_at FROM history_summaries WHERE channel_id = ? ORDER BY id DESC LIMIT 1')
    .get(channelId)) as { kind: string; created_at: number } | undefined;
  if (!row) return null;
  return { tier: row.kind === 'marker' ? 'emergency' : 'unknown', at: new Date(row.created_at).toISOString(), tokens_freed: 0, messages: 0 };
}

function tierCounts(tally: CompactionTally | undefined): ChannelStatus['last_day'] {
  return {
    background: tally?.triggered.background ?? 0,
    aggressive: tally?.triggered.aggressive ?? 0,
    emergency: tally?.emergencies ?? 0,
    manual: tally?.triggered.manual ?? 0,
    failed: tally?.failed ?? 0,
  };
}

function statusTable(dataDir: string, statuses: readonly ChannelStatus[]): string {
  if (statuses.length === 0) return `${dataDir}: no channels yet\n`;
  const header = ['channel', 'usage', 'tokens', 'window', 'live', 'summaries', 'markers', 'archive', 'memories', 'last compaction', 'last 24 h bg/agg/emg/man (failed)', 'last request cached'];
  const rows = statuses.map((status) => [
    // Ids were stored as received (ids with control characters were accepted before they were refused).
    terminalSafe(status.channel_id),
    `${(status.usage * 100).toFixed(1)}%`,
    status.estimated_tokens.toLocaleString('en-US'),
    status.context_window.toLocaleString('en-US'),
    String(status.live_messages),
    String(status.summaries),
    String(status.markers),
    status.archived_messages.toLocaleString('en-US'),
    String(status.memories),
    status.last_compaction
      ? `${status.last_compaction.tier} ${status.last_compaction.at.replace('T', ' ').slice(0, 16)}Z, ${status.last_compaction.tokens_freed.toLocaleString('en-US')} tokens freed`
      : 'none',
    `${status.last_day.background}/${status.last_day.aggressive}/${status.last_day.emergency}/${status.last_day.manual} (${status.last_day.failed})`,
    status.last_request ? `${(status.last_request.cached_share * 100).toFixed(0)}% of ${status.last_request.input_tokens.toLocaleString('en-US')}` : '-',
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const right = new Set([1, 2, 3, 4, 5, 6, 7, 8]);
  const line = (cells: readonly string[]) =>
    cells.map((cell, column) => (right.has(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ').trimEnd();
  return [
    `${dataDir}`,
    line(header),
    ...rows.map(line),
    '',
    'usage = calibration factor × estimated tokens / (window − max_response_tokens); thresholds and factor per channel in --json.',
    '',
  ].join('\n');
}
