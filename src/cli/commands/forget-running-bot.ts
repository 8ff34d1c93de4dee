import os from 'node:os';
import type { UserErasure } from '../../channel/runtime.js';
import { USER_ERASURE_COUNTS, userErasedEvent } from '../../channel/user-erasure.js';
import type { EventStream } from '../../common/events.js';
import { MagpieError } from '../../common/errors.js';
import { resolveItemRef, type ItemRef } from '../../memory/item-ref.js';
import { requestErasure, type ErasureRequest } from '../../privacy/erasure-requests.js';
import { openStorageBesideWriter, type StorageTarget } from '../../storage/open-storage.js';
import { processAlive } from '../../storage/writer-lock.js';
import { EXIT, type CliIo } from '../command.js';
import { reportForgotten, reportUserErasure } from '../forget-output.js';

/** How long the command waits for a running bot to apply its request. */
const RUNNING_BOT_WAIT_MS = 60_000;

/**
 * The writer lock's commands that apply erasure requests: the bot and the terminal chat, whose
 * app polls for them (`magpie` is an app opened without a command, embedded). Every other
 * writer (replay, migrate, another forget) would leave a request waiting for a bot.
 */
const TAKES_ERASURE_REQUESTS: ReadonlySet<string> = new Set(['magpie start', 'magpie chat', 'magpie']);

/** The process holding the data dir, as its writer lock recorded it (any part may be unknown). */
export interface DataDirWriter {
  command?: string;
  pid?: number;
  host?: string;
}

/** The holder named in a `data_dir_locked` error. */
export function writerOf(error: MagpieError): DataDirWriter {
  const { command, pid, host } = error.context;
  return {
    ...(typeof command === 'string' ? { command } : {}),
    ...(typeof pid === 'number' && Number.isInteger(pid) ? { pid } : {}),
    ...(typeof host === 'string' ? { host } : {}),
  };
}

/**
 * Refuses at once, naming it, a writer known not to take erasure requests: waiting for it would
 * end in a timeout and leave the request to whatever bot opens the data dir next.
 */
export function refuseWriterWithoutRequests(dataDir: string, writer: DataDirWriter): void {
  if (writer.command === undefined || TAKES_ERASURE_REQUESTS.has(writer.command)) return;
  const who = `${writer.command}${writer.pid === undefined ? '' : ` (pid ${writer.pid}${writer.host === undefined ? '' : ` on ${writer.host}`})`}`;
  throw new MagpieError('data_dir_locked', `the data directory ${dataDir} is in use by ${who}, which does not apply erasure requests; nothing was erased or queued`, {
    context: { dataDir, command: writer.command },
    hint: `run the command again once ${writer.command} has finished (or stop it first)`,
  });
}

/** What `magpie memory forget` was asked: one id as typed, or a user. */
interface ForgetRequest {
  id: string | undefined;
  user: string | undefined;
  json: boolean;
}

/**
 * Leaves the erasure to the running bot (a request in the database) and reports its outcome
 * exactly as the command reports one it applied itself. `events` carries the audit line.
 * `writer_gone`: the bot exited before applying it; the request was withdrawn, for the command
 * to apply itself. Only a writer of this host is watched for that (`watchWriter`).
 */
export async function forgetThroughRunningBot(
  target: StorageTarget,
  request: ForgetRequest,
  io: CliIo,
  events: EventStream,
  options: { writer: DataDirWriter; watchWriter: boolean },
): Promise<number | 'writer_gone'> {
  const { pid, host } = options.writer;
  const writerGone = options.watchWriter && pid !== undefined && host === os.hostname() ? () => !processAlive(pid) : undefined;
  const storage = await openStorageBesideWriter(target, 'memory forget');
  let ref: ItemRef | undefined;
  let outcome: ErasureRequest | undefined;
  try {
    // The bot applies the store's own id only (msg-40, mem-12): the id as typed, a platform
    // message id included, is resolved here by the same rules as without a bot, so the same
    // ids work and the same ones are refused (nothing matches; reused in several channels)
    // before anything is asked of the bot.
    if (request.id !== undefined) ref = await resolveItemRef(storage.db, request.id);
    const waiting = { timeoutMs: RUNNING_BOT_WAIT_MS, ...(writerGone ? { writerGone } : {}) };
    outcome = ref ? await requestErasure(storage.db, 'item', ref.id, waiting) : await requestErasure(storage.db, 'user', request.user!, waiting);
  } finally {
    await storage.close();
  }
  if (outcome === undefined) return 'writer_gone';
  const result = parseResult(outcome.result);
  if (outcome.status === 'failed') {
    io.stderr.write(`magpie memory forget: the running bot could not apply it: ${String(result.error)}\n`);
    return EXIT.failure;
  }
  if (ref === undefined) {
    const erased = readUserErasure(result, outcome.id);
    // The bot logs its own audit line; the operator who ran the command gets it here too.
    events.emit(userErasedEvent(erased, 'cli'));
    reportUserErasure(io, erased, 'running_bot', request.json);
    if (erased.messages === 0) io.stderr.write(`note: nothing written by user '${request.user}' is stored in ${target.dataDir}\n`);
    return EXIT.ok;
  }
  if (result.forgot !== 'message' && result.forgot !== 'memory') {
    // Resolved a moment ago, gone when the bot came to it (a delete in Discord got there first).
    io.stderr.write(`magpie memory forget: no memory or transcript entry with id '${ref.id}'\n`);
    return EXIT.failure;
  }
  reportForgotten(io, request.id!, ref, 'running_bot', request.json);
  return EXIT.ok;
}

function parseResult(text: string | null): Record<string, unknown> {
  const parsed = JSON.parse(text ?? '{}') as unknown;
  return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
}

/** The bot's counts (its own UserErasure, as JSON), each checked: nothing unknown is printed as a count. */
function readUserErasure(result: Record<string, unknown>, requestId: number): UserErasure {
  const erased: Partial<Record<keyof UserErasure, number>> = {};
  for (const key of USER_ERASURE_COUNTS) {
    const value = result[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
      throw new MagpieError('erasure_result_invalid', `the running bot applied erasure request ${requestId} but its answer has no count '${key}' (got ${JSON.stringify(value) ?? 'nothing'})`, {
        hint: 'the bot may run another version of Magpie than this command; its log has the user_erased line with the counts',
      });
    }
    erased[key] = value;
  }
  return erased as UserErasure;
}
