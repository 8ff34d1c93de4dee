import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { ContextStatus } from '../context/types.js';
import type { MemoryLocation, MemoryStore } from '../memory/types.js';
import type { UserErasure } from '../channel/runtime.js';
import type { ErasureConfirmations } from './forget-me.js';
import type { ModelUsage } from '../llm/chat-model.js';
import { billedInputTokens, cachedShare, wholeInputTokens } from '../llm/usage.js';

/** What `/context`, `/compact` and `/memory` need of the runtime. */
export interface CommandRuntime {
  status(channelId: string): Promise<ContextStatus>;
  compactNow(channelId: string): Promise<unknown>;
  /** Forgets an item with the same propagation as a delete (`ChannelRuntime.forgetItem`). */
  forgetItem?(id: string, within?: MemoryLocation): Promise<'message' | 'memory' | undefined>;
  forgetUser?(userId: string, requestedFrom: string): Promise<UserErasure>;
}

/** What `/tasks` needs of the workers (`WorkerManager` satisfies it). */
export interface TaskControl {
  list(channelId: string): Promise<Array<{ id: string; task: string; startedAt: number; segment: number; tokens: number }>>;
  cancel(channelId: string, workerId: string, by?: string): boolean;
}

export interface CommandDeps {
  runtime: CommandRuntime;
  memory: MemoryStore;
  events: EventStream;
  /** Pending `/memory forget-me` codes; the command is unavailable without it. */
  confirmations?: ErasureConfirmations;
  /** Absent where workers cannot run. */
  workers?: TaskControl;
  /** The config file the bot runs with (undefined: built-in defaults), named by `/persona`. */
  configFile?: string;
}

/** Replies to commands fit in one Discord message. */
const REPLY_LIMIT = 1900;

function percent(value: number): string {
  return `${(value * 100).toFixed(value < 0.1 ? 1 : 0)}%`;
}

function count(value: number): string {
  return value.toLocaleString('en-US');
}

function ago(at: number, now: number): string {
  const seconds = Math.max(0, Math.round((now - at) / 1000));
  if (seconds < 90) return `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `${minutes} min ago`;
  const hours = Math.round(minutes / 60);
  return hours < 48 ? `${hours} h ago` : `${Math.round(hours / 24)} days ago`;
}

/** `/context`: how full the window is and what compaction did last. */
export function describeContext(status: ContextStatus, now: number = Date.now()): string {
  const { thresholds } = status;
  const last = status.lastCompaction
    ? `${status.lastCompaction.tier}, ${ago(status.lastCompaction.at, now)} (${count(status.lastCompaction.messages)} messages)`
    : 'none yet';
  const calibration = status.calibration.observations === 0
    ? 'not calibrated yet (factor 1)'
    : `calibrated × ${status.calibration.factor.toFixed(2)} from ${count(status.calibration.observations)} model count${status.calibration.observations === 1 ? '' : 's'}${describeParts(status.calibration)}`;
  return [
    `Context: ${percent(status.usage)} of ${count(status.contextWindow)} tokens less ${count(status.contextWindow - status.usableWindow)} kept for the answer (${count(status.calibratedTokens)} counted)`,
    `Estimate: ${count(status.estimatedTokens)} tokens at 4 characters per token, ${calibration}`,
    `Thresholds: background ${percent(thresholds.background)} · aggressive ${percent(thresholds.aggressive)} · emergency ${percent(thresholds.emergency)}`,
    `Live messages: ${count(status.liveMessages)} · summaries: ${count(status.summaries)} · archived: ${count(status.archivedMessages)}`,
    `Last compaction: ${last}${status.compactionRunning ? ' · a compaction is running now' : ''}`,
    ...(status.lastRequest ? [describeLastRequest(status.lastRequest.usage)] : []),
  ].join('\n');
}

/**
 * The factors the count is made of, once learnt: the messages' own, and the one tool calls and
 * results are counted by (the messages' factor times their correction).
 */
function describeParts(calibration: ContextStatus['calibration']): string {
  if (calibration.messageFactor === undefined) return '';
  const tools = calibration.messageFactor * (calibration.toolFactor ?? 1);
  return ` (messages × ${calibration.messageFactor.toFixed(2)}, tool calls and results × ${tools.toFixed(2)}${calibration.toolFactor === undefined ? ', as the messages until learnt' : ''})`;
}

/** The prompt cache's part in the last request: what was read, written, and what it was billed as. */
function describeLastRequest(usage: ModelUsage): string {
  const whole = wholeInputTokens(usage);
  return (
    `Last request: ${count(whole)} input tokens, ${percent(cachedShare(usage))} read from the prompt cache` +
    `${usage.cacheWriteTokens ? `, ${count(usage.cacheWriteTokens)} written to it` : ''}; billed as ${count(Math.round(billedInputTokens(usage)))}`
  );
}

/** What `compactNow` settles with, as far as `/compact` needs it. */
interface CompactOutcome {
  status?: string;
  reason?: string;
  messagesCompacted?: number;
}

/**
 * `/compact`: starts a compaction in the background and answers at once. An outcome known
 * straight away (nothing that can be compacted, a summary that would not free room, an
 * offline summarizer that finished at once) is reported as such, never as "started".
 */
export async function startCompaction(deps: CommandDeps, channelId: string): Promise<string> {
  const status = await deps.runtime.status(channelId);
  if (status.compactionRunning) return 'A compaction is already running in this channel.';
  if (status.liveMessages === 0) return 'Nothing to compact yet.';
  // How many of the live messages the compaction takes (the oldest part of them), once it starts.
  let taking: number | undefined;
  const detach = deps.events.subscribe((event) => {
    if (event.type === 'compaction_started' && event.channel_id === channelId && typeof event.messages === 'number') taking = event.messages;
  });
  const running = deps.runtime.compactNow(channelId).then(
    (outcome) => outcome as CompactOutcome,
    (error: unknown) => {
      deps.events.emit({ type: 'compact_command_failed', channel_id: channelId, error: errorMessage(error) });
      return { status: 'failed', reason: errorMessage(error) } as CompactOutcome;
    },
  );
  // One turn of the event loop: outcomes decided without waiting for I/O are in by then.
  const early = await Promise.race([running, new Promise<undefined>((resolve) => setImmediate(resolve, undefined))]);
  detach();
  if (early?.status === 'nothing_to_compact') {
    return 'Nothing to compact yet: the live history is too short to set part of it aside.';
  }
  if (early?.status === 'busy') return 'A compaction is already running in this channel.';
  if (early?.status === 'completed') {
    const compacted = early.messagesCompacted ?? 0;
    return `Compacted the oldest ${count(compacted)} message${compacted === 1 ? '' : 's'} into a summary.`;
  }
  if (early?.status === 'failed' || early?.status === 'replanned') {
    const reason = early.reason === 'no_gain' ? 'the summary would not be shorter than the messages it replaces by enough' : (early.reason ?? early.status);
    return `Compaction did not apply (${reason}); the history is unchanged.`;
  }
  const plural = status.liveMessages === 1 ? '' : 's';
  const what =
    taking === undefined
      ? `the oldest of the ${count(status.liveMessages)} live message${plural}`
      : `the oldest ${count(taking)} of the ${count(status.liveMessages)} live message${plural}`;
  return `Compaction started on ${what} (${percent(status.usage)} of the window). It runs in the background; the channel keeps going.`;
}

/** `/memory search`: the top results as short lines, with ids for `/memory forget`. */
export async function searchMemory(deps: CommandDeps, location: MemoryLocation, query: string): Promise<string> {
  const trimmed = query.trim();
  if (trimmed === '') return 'Give me something to search for.';
  const results = await deps.memory.search({ location, query: trimmed, limit: 5 });
  if (results.length === 0) return `Nothing found for “${clip(trimmed, 100)}”.`;
  const lines = results.map((result, index) => {
    const type = result.kind === 'memory' ? `memory/${result.memory_type ?? 'fact'}` : 'message';
    return `${index + 1}. [${type}, ${result.score.toFixed(2)}] ${clip(result.content.replace(/\s+/g, ' '), 250)} (id ${result.id})`;
  });
  return clip(lines.join('\n'), REPLY_LIMIT);
}

/**
 * `/memory forget`: removes one memory by id, if it belongs to this channel (a DM: to its user).
 * Ids are sequential, so without that check anyone allowed to forget in one channel could
 * delete what any other channel or DM remembers.
 */
export async function forgetMemory(deps: CommandDeps, location: MemoryLocation, id: string): Promise<string> {
  const trimmed = id.trim();
  if (trimmed === '') return 'Which memory? Give its id (from /memory search).';
  // Ids of archived messages start with `msg-`, typed memories with `mem-`.
  const what = trimmed.startsWith('msg-') ? 'archived message' : 'memory';
  // Through the runtime, a forgotten message also leaves summaries, tool results and memories.
  const forgotten = deps.runtime.forgetItem
    ? (await deps.runtime.forgetItem(trimmed, location)) !== undefined
    : await deps.memory.forget(trimmed, location);
  return forgotten ? `Forgot ${what} ${trimmed}.` : `No ${what} with id ${trimmed} in this channel.`;
}

/** `/tasks`: the channel's running workers, one line each. */
export async function listTasks(deps: CommandDeps, channelId: string, now: number = Date.now()): Promise<string> {
  const running = (await deps.workers?.list(channelId)) ?? [];
  if (running.length === 0) return 'No workers are running in this channel.';
  const lines = running.map(
    (worker) =>
      `${worker.id} · started ${ago(worker.startedAt, now)} · segment ${worker.segment} · ${count(worker.tokens)} tokens · “${clip(worker.task.replace(/\s+/g, ' '), 120)}”`,
  );
  return clip([`Running workers (${running.length}):`, ...lines, 'Stop one with /tasks cancel id:<id>.'].join('\n'), REPLY_LIMIT);
}

/** `/tasks cancel`: stops one worker of this channel; it reports that it was cancelled. */
export function cancelTask(deps: CommandDeps, channelId: string, workerId: string, by?: string): string {
  const trimmed = workerId.trim();
  if (trimmed === '') return 'Which worker? Give its id (from /tasks).';
  if (!/^[\w-]{1,40}$/.test(trimmed)) return `“${clip(trimmed, 40)}” is not a worker id; ids look like w-1a2b3c4d (see /tasks).`;
  if (!deps.workers?.cancel(channelId, trimmed, by)) return `No running worker with id ${trimmed} in this channel.`;
  deps.events.emit({ type: 'worker_cancel_requested', channel_id: channelId, worker_id: trimmed });
  return `Cancelling worker ${trimmed}; it will report that it stopped.`;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
