import path from 'node:path';
import { openApp } from '../../app/open-app.js';
import { EventStream } from '../../common/events.js';
import { MagpieError } from '../../common/errors.js';
import { loadConfig } from '../../config/load-config.js';
import { DATABASE_FILE } from '../../storage/database.js';
import { ALL_MIGRATIONS } from '../../app/migrations.js';
import { listStorage, openStorageForReading } from '../../storage/open-storage.js';
import { EXIT, type CliIo } from '../command.js';
import { parseFlags, UsageError } from '../parse-flags.js';
import { auditLogger } from '../audit-log.js';
import { reportForgotten, reportUserErasure } from '../forget-output.js';
import { resolveItemRef } from '../../memory/item-ref.js';
import { forgetThroughRunningBot, refuseWriterWithoutRequests, writerOf } from './forget-running-bot.js';

export const FORGET_USAGE = `Usage: magpie memory forget ID [--data-dir DIR] [--json]
       magpie memory forget --user USER_ID [--data-dir DIR] [--json]

Forgets with the same propagation as a delete in Discord: an archived message (msg-40) leaves
history, the archive, the summaries that covered it (rewritten without it), the tool results
that quoted it, and the memories drawn only from it. A memory (mem-12) is deleted and its text
leaves the tool results that quoted it. --user erases everything one user wrote, in every
channel of the data dir. ID is the store's own id (msg-40, mem-12) or the platform id of an
archived message (message_id in search results); the output says which one matched. While
the bot (or magpie chat) runs, the bot applies it (within a second) and this command reports
the outcome, saying that the running bot applied it. Beside a writer that takes no requests
(magpie replay, magpie migrate) it is refused at once, naming that writer; another forget
holding the data dir is waited for (up to a minute).

Options:
  --user USER_ID   erase every message of this author (Discord user id; author in a transcript)
  --data-dir DIR   data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir of the config)
  --json           one JSON object: what was forgotten (ID) or the counts (--user), and
                   applied_by (command, or running_bot)
  --config FILE    config file (default ./config.toml if present)
  -h, --help       show this help
`;

/** How many writers in a row may exit under a waiting request before the command just waits. */
const MAX_WRITER_CHANGES = 3;
/** The writer name this command holds the data dir under. */
const FORGET_COMMAND = 'memory forget';
/** How long a forget waits for other forgets holding the data dir, and how often it looks again. */
const FORGET_WAIT_MS = 60_000;
const FORGET_RETRY_MS = 200;

/** `magpie memory forget ID | --user ID`. */
export async function forgetCommand(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseFlags(argv, {
    usage: FORGET_USAGE,
    options: { 'data-dir': { type: 'string' }, config: { type: 'string' }, user: { type: 'string' }, json: { type: 'boolean' } },
    positionals: { min: 0, max: 1 },
  });
  if (parsed.help) {
    io.stdout.write(FORGET_USAGE);
    return EXIT.ok;
  }
  const { values } = parsed;
  const id = parsed.positionals[0];
  if (id !== undefined && values.user !== undefined) throw new UsageError('give either ID or --user USER_ID, not both', FORGET_USAGE);
  if (id === undefined && values.user === undefined) throw new UsageError('missing ID (or --user USER_ID)', FORGET_USAGE);
  if (id !== undefined && id.trim() === '') throw new UsageError('ID must not be empty: give msg-N, mem-N or a platform message id', FORGET_USAGE);
  if (values.user !== undefined && (values.user.trim() === '' || /\s/.test(values.user))) {
    throw new UsageError(`--user must be one user id without spaces, got '${values.user}'`, FORGET_USAGE);
  }

  const { config } = loadConfig({ path: values.config, cwd: io.cwd, env: io.env });
  const dataDir = path.resolve(io.cwd, values['data-dir'] ?? config.memory.dataDir);
  // A sharded bot keeps one data dir per shard: forgetting works on one at a time.
  const dirs = listStorage(config, dataDir, io.env);
  if (dirs.length > 1 || (dirs.length === 1 && dirs[0]!.dir !== dataDir)) {
    throw new MagpieError('sharded_data_dir', `${dataDir} holds ${dirs.length} shard data directories; forget works on one`, {
      hint: `pass --data-dir ${dirs.map((entry) => entry.dir).join(' or ')} (for --user, each of them in turn)`,
    });
  }
  if (dirs.length === 0) {
    throw new MagpieError('no_data', `no Magpie data in ${dataDir} (${DATABASE_FILE} not found)`, {
      hint: 'pass --data-dir with a directory written by `magpie start`, `magpie chat` or `magpie replay`',
    });
  }
  // A schema with no Magpie data is refused, as a data dir without its database is, not created.
  const target = dirs[0]!.target;
  if (target.backend === 'postgres') await (await openStorageForReading(target, ALL_MIGRATIONS, { command: 'magpie memory forget', anyVersion: true })).close();
  const json = values.json === true;
  const events = new EventStream();
  // The audit line: counts only, through the same logger and fields as the bot's.
  events.subscribe(auditLogger(io, config.logging.level));
  // No model here: summaries that covered a forgotten message are rewritten at once by the
  // extractive summarizer, so nothing is left waiting when the command exits.
  let app: Awaited<ReturnType<typeof openApp>> | undefined;
  const waitForForgetsUntil = performance.now() + FORGET_WAIT_MS;
  let writersGone = 0;
  while (app === undefined) {
    try {
      app = await openApp({ config: { ...config, llm: { ...config.llm, model: '' } }, dataDir, env: io.env, cwd: io.cwd, events, command: FORGET_COMMAND, compactionLog: false });
    } catch (error) {
      if (!(error instanceof MagpieError && error.code === 'data_dir_locked')) throw error;
      const writer = writerOf(error);
      // Another forget holds the data dir for a second or so: wait for it (several forgets
      // started at once by a script all get their turn) instead of refusing.
      if (writer.command === FORGET_COMMAND && performance.now() < waitForForgetsUntil) {
        await new Promise((resolve) => setTimeout(resolve, FORGET_RETRY_MS));
        continue;
      }
      refuseWriterWithoutRequests(dataDir, writer);
      // The bot runs and holds the writer lock: it applies the erasure itself, at once. Should
      // it exit first, the command takes the data dir and applies it here (a few times at most:
      // a writer that keeps coming back is waited for like any bot).
      const outcome = await forgetThroughRunningBot(target, { id, user: values.user, json }, io, events, { writer, watchWriter: writersGone + 1 < MAX_WRITER_CHANGES });
      if (outcome !== 'writer_gone') return outcome;
      writersGone += 1;
    }
  }
  try {
    if (values.user !== undefined) {
      const erased = await app.runtime.forgetUser(values.user, 'cli');
      await app.runtime.privacySettled();
      reportUserErasure(io, erased, 'command', json);
      if (erased.messages === 0) io.stderr.write(`note: nothing written by user '${values.user}' is stored in ${dataDir}\n`);
      return EXIT.ok;
    }
    // The platform id shown in outputs, or the store's own msg-N / mem-N: the helper says which.
    const ref = await resolveItemRef(app.db, id!);
    const what = await app.runtime.forgetItem(ref.id);
    await app.runtime.privacySettled();
    if (what === undefined) {
      io.stderr.write(`magpie memory forget: no memory or transcript entry with id '${ref.id}'\n`);
      return EXIT.failure;
    }
    reportForgotten(io, id!, ref, 'command', json);
    return EXIT.ok;
  } finally {
    await app.close();
  }
}
