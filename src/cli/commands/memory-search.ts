import path from 'node:path';
import { checkId } from '../../common/outside-text.js';
import { closestMatch } from '../../config/edit-distance.js';
import type { SqlMemoryStore } from '../../memory/sql-memory-store.js';
import { MEMORY_TYPES } from '../../memory/types.js';
import { checkQuery, MAX_QUERY_LENGTH, MAX_SEARCH_LIMIT } from '../../memory/validation.js';
import { EXIT, type CliIo } from '../command.js';
import { integerFlag, parseFlags, requireFlag, UsageError } from '../parse-flags.js';
import { COMMON_OPTIONS, kindFlag, typeFlag } from './memory-flags.js';
import { formatResults } from './memory-search-format.js';
import { readQueriesFile, runBatch } from './memory-search-batch.js';
import { terminalSafe } from '../terminal-text.js';
import { withStores } from './memory-stores.js';
import { jsonLine } from '../json-output.js';

const SEARCH_USAGE = `Usage: magpie memory search QUERY --channel ID [--data-dir DIR] [--limit K] [--kind memory|transcript] [--type TYPE] [--json]
       magpie memory search --queries FILE [--data-dir DIR] [--channel ID] [--limit K] [--kind KIND] [--type TYPE] --json

Hybrid search (vectors + full text) over what the channel may see. A query is at most
${MAX_QUERY_LENGTH} characters (a longer one is refused, not cut).

Options:
  --data-dir DIR     data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir)
  --channel ID       channel whose memory is searched (required for a single query; with
                     --queries, the channel of lines without their own)
  --limit K          results, 1 to ${MAX_SEARCH_LIMIT} (default 5; with --queries, the limit of
                     lines without their own)
  --kind KIND        only memory or only transcript results (every line of --queries)
  --type TYPE        only memories of this type (every line of --queries; not with
                     --kind transcript):
                     ${MEMORY_TYPES.join(', ')}
  --queries FILE     JSON lines { "id", "channel"?, "query", "limit"? } in UTF-8 ("-" reads
                     stdin); prints one line { "id", "results": [...] } per query, or { "line",
                     "id"?, "error" } for a bad line (no id, not UTF-8, not JSON...: the others
                     still run; the exit code is then 1)
  --json             JSON output
  --config FILE      config file for the embedder settings (default ./config.toml if present)
  -h, --help         show this help
`;

/** `magpie memory search`: one query, or a file of them as JSON lines. */
export async function searchCommand(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseFlags(argv, {
    usage: SEARCH_USAGE,
    options: {
      ...COMMON_OPTIONS,
      channel: { type: 'string' },
      limit: { type: 'string' },
      kind: { type: 'string' },
      type: { type: 'string' },
      queries: { type: 'string' },
      json: { type: 'boolean' },
    },
    positionals: { min: 0, max: 1 },
  });
  if (parsed.help) {
    io.stdout.write(SEARCH_USAGE);
    return EXIT.ok;
  }
  const values = parsed.values;
  const limit = integerFlag(values.limit, '--limit', SEARCH_USAGE, { min: 1, max: MAX_SEARCH_LIMIT });
  const kind = kindFlag(values.kind, SEARCH_USAGE);
  const memoryType = typeFlag(values.type, SEARCH_USAGE);
  // A type is a memory's: with transcript only, nothing could ever match.
  if (kind === 'transcript' && memoryType !== undefined) {
    throw new UsageError(`--type ${memoryType} selects memories, and --kind transcript leaves them out: give one of them`, SEARCH_USAGE);
  }
  if (values.queries !== undefined) {
    if (parsed.positionals.length > 0) throw new UsageError('give either QUERY or --queries FILE, not both', SEARCH_USAGE);
    if (!values.json) throw new UsageError('--queries needs --json (its output is JSON lines)', SEARCH_USAGE);
    // --channel and --limit are what a line without its own "channel" or "limit" gets.
    const defaults = { channel: values.channel === undefined ? undefined : channelFlag(values.channel), limit };
    const input = values.queries === '-' ? io.stdin : [readQueriesFile(path.resolve(io.cwd, values.queries))];
    return withStores(values, io, async (stores) => runBatch((channelId) => stores.forChannel(channelId), input, { kind, memoryType }, defaults, io));
  }
  const query = parsed.positionals[0];
  if (query === undefined) throw new UsageError('missing QUERY (or --queries FILE)', SEARCH_USAGE);
  // The store checks the query too; checked here first, a bad one is a usage error like a bad flag.
  try {
    checkQuery(query, 'QUERY');
  } catch (error) {
    throw new UsageError((error as Error).message, SEARCH_USAGE);
  }
  const channelId = channelFlag(requireFlag(values.channel, '--channel', SEARCH_USAGE));
  return withStores(values, io, async (stores) => {
    const store = await stores.forChannel(channelId);
    const results = await store.search({
      location: { channelId },
      query,
      ...(limit === undefined ? {} : { limit }),
      ...(kind ? { kind } : {}),
      ...(memoryType ? { memoryType } : {}),
    });
    if (values.json) io.stdout.write(jsonLine(results));
    else io.stdout.write(formatResults(results));
    if (results.length === 0) await warnIfUnknownChannel(store, channelId, io);
    return EXIT.ok;
  });
}

/** `--channel`: an id, so one holding a control character is refused as a query line's is. */
function channelFlag(value: string): string {
  try {
    return checkId(value, '--channel');
  } catch (error) {
    throw new UsageError((error as Error).message, SEARCH_USAGE);
  }
}

/** "No results" for a channel that has nothing stored is usually a mistyped channel id. */
async function warnIfUnknownChannel(store: SqlMemoryStore, channelId: string, io: CliIo): Promise<void> {
  const stats = await store.stats({ channelId });
  if (stats.memories + stats.transcriptEntries > 0) return;
  const all = await store.channelIds(1000);
  const known = all.slice(0, 20);
  // `magpie chat --channel local` stores its messages under `console:local`.
  // Under four characters every other short id is "one edit away": no guess then.
  const guess = all.find((id) => id.endsWith(`:${channelId}`)) ?? (channelId.length >= 4 ? closestMatch(channelId, all) : undefined);
  // Stored channel ids are shown as the terminal can take them (see terminal-text.ts).
  io.stderr.write(
    `note: nothing is stored for channel '${terminalSafe(channelId)}'` +
      (guess !== undefined ? `; did you mean '${terminalSafe(guess)}'?` : '') +
      (known.length > 0
        ? `; channels with data: ${known.map(terminalSafe).join(', ')}${all.length > known.length ? ` and ${all.length - known.length} more` : ''}\n`
        : ' (the data directory is empty)\n'),
  );
}
