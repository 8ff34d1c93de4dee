import { readFileSync } from 'node:fs';
import path from 'node:path';
import { errorMessage, InputError, MagpieError } from '../../common/errors.js';
import { closestMatch } from '../../config/edit-distance.js';
import { loadConfig } from '../../config/load-config.js';
import type { MemorySettings } from '../../config/types.js';
import { openMemoryStore } from '../../memory/open-memory-store.js';
import type { SqliteMemoryStore } from '../../memory/sqlite-memory-store.js';
import { MEMORY_TYPES, type MemoryKind, type MemoryStats, type MemoryType, type SearchResult } from '../../memory/types.js';
import { checkLimit, checkMemoryType, checkQuery, MAX_SEARCH_LIMIT } from '../../memory/validation.js';
import { DATABASE_FILE } from '../../storage/database.js';
import { describeTarget, listStorage, openStorageForReading, openStorageForWriting, type OpenedStorage, type StorageEntry } from '../../storage/open-storage.js';
import { EventStream } from '../../common/events.js';
import { ALL_MIGRATIONS } from '../../storage/migrations.js';
import { dataDirOfChannel } from '../../storage/shard-dirs.js';
import { storageError } from '../../storage/storage-error.js';
import { EXIT, type CliCommand, type CliIo } from '../command.js';
import { integerFlag, parseFlags, requireFlag, UsageError } from '../parse-flags.js';
import { forgetCommand } from './memory-forget.js';

const USAGE = `Usage: magpie memory <subcommand> [options]

Read and manage long-term memory in a data directory.

Subcommands:
  search QUERY --channel ID     search what a channel may see (memories and its transcript)
  search --queries FILE --json  many searches at once, one JSON object a line
  list                          the newest memories and transcript entries
  forget ID                     forget one memory or archived message, everywhere it was copied
  forget --user ID              erase everything one user wrote, in every channel
  stats                         counts, embedder and index state

Run magpie memory <subcommand> --help for its options.

A data directory written by sharded processes (magpie start --shards) holds one directory per
shard (DIR/shard-<N>); pointed at DIR, search finds the shard that holds the channel, list and
stats go through every shard, and forget needs --data-dir DIR/shard-<N>.
`;

const SEARCH_USAGE = `Usage: magpie memory search QUERY --channel ID [--data-dir DIR] [--limit K] [--kind memory|transcript] [--type TYPE] [--json]
       magpie memory search --queries FILE [--data-dir DIR] --json

Hybrid search (vectors + full text) over what the channel may see.

Options:
  --data-dir DIR     data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir of the config)
  --channel ID       channel whose memory is searched (required for a single query)
  --limit K          results, 1 to ${MAX_SEARCH_LIMIT} (default 5)
  --kind KIND        only memory or only transcript results
  --type TYPE        only memories of this type: ${MEMORY_TYPES.join(', ')}
  --queries FILE     JSON lines { "id", "channel", "query", "limit"? } ("-" reads stdin); prints one
                     line { "id", "results": [...] } per query, or { "line", "id"?, "error" } for a
                     bad line (the others still run; the exit code is then 1)
  --json             JSON output
  --config FILE      config file for the embedder settings (default ./config.toml if present)
  -h, --help         show this help
`;

const LIST_USAGE = `Usage: magpie memory list [--data-dir DIR] [--channel ID] [--kind memory|transcript] [--limit N] [--json]

Lists the newest entries, optionally only what one channel may see.

Options:
  --data-dir DIR   data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir of the config)
  --channel ID     only what this channel may see
  --kind KIND      memory or transcript
  --limit N        entries to show (default 50)
  --json           one JSON object a line
  --config FILE    config file (default ./config.toml if present)
  -h, --help       show this help
`;


const STATS_USAGE = `Usage: magpie memory stats [--data-dir DIR] [--channel ID] [--json]

Counts of memories by type and transcript entries, the embedder, and how many vectors are indexed.

Options:
  --data-dir DIR   data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir of the config)
  --channel ID     only what this channel may see
  --json           JSON output
  --config FILE    config file (default ./config.toml if present)
  -h, --help       show this help
`;

const COMMON_OPTIONS = {
  'data-dir': { type: 'string' },
  config: { type: 'string' },
} as const;

/** `magpie memory ...`: search, list, forget and stats over a data directory. */
export const memoryCommand: CliCommand = {
  name: 'memory',
  summary: 'search, list, forget and count what Magpie remembers',
  async run(argv, io) {
    const [subcommand, ...rest] = argv;
    switch (subcommand) {
      case 'search':
        return searchCommand(rest, io);
      case 'list':
        return listCommand(rest, io);
      case 'forget':
        return forgetCommand(rest, io);
      case 'stats':
        return statsCommand(rest, io);
      case undefined:
      case '--help':
      case '-h':
      case 'help':
        if (subcommand === undefined) throw new UsageError('missing subcommand', USAGE);
        io.stdout.write(USAGE);
        return EXIT.ok;
      default:
        throw new UsageError(`unknown subcommand '${subcommand}'`, USAGE);
    }
  },
};

async function searchCommand(argv: string[], io: CliIo): Promise<number> {
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
  if (values.queries !== undefined) {
    if (parsed.positionals.length > 0) throw new UsageError('give either QUERY or --queries FILE, not both', SEARCH_USAGE);
    if (!values.json) throw new UsageError('--queries needs --json (its output is JSON lines)', SEARCH_USAGE);
    const text = values.queries === '-' ? await readAll(io.stdin) : readInputFile(path.resolve(io.cwd, values.queries));
    return withStores(values, io, {}, async (stores) => runBatch((channelId) => stores.forChannel(channelId), text, { kind, memoryType }, io));
  }
  const query = parsed.positionals[0];
  if (query === undefined) throw new UsageError('missing QUERY (or --queries FILE)', SEARCH_USAGE);
  const channelId = requireFlag(values.channel, '--channel', SEARCH_USAGE);
  return withStores(values, io, {}, async (stores) => {
    const store = await stores.forChannel(channelId);
    const results = await store.search({
      location: { channelId },
      query,
      ...(limit === undefined ? {} : { limit }),
      ...(kind ? { kind } : {}),
      ...(memoryType ? { memoryType } : {}),
    });
    if (values.json) io.stdout.write(`${JSON.stringify(results)}\n`);
    else io.stdout.write(formatResults(results));
    if (results.length === 0) warnIfUnknownChannel(store, channelId, io);
    return EXIT.ok;
  });
}

async function runBatch(
  storeFor: (channelId: string) => Promise<SqliteMemoryStore>,
  text: string,
  filters: { kind: MemoryKind | undefined; memoryType: MemoryType | undefined },
  io: CliIo,
): Promise<number> {
  let failed = 0;
  // A byte-order mark (Windows editors) is not part of the first line's JSON.
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (let index = 0; index < lines.length; index += 1) {
    const line = lines[index]!.trim();
    if (line.length === 0) continue;
    const lineNumber = index + 1;
    let id: unknown;
    try {
      let request: unknown;
      try {
        request = JSON.parse(line);
      } catch {
        throw new InputError('not valid JSON');
      }
      if (typeof request !== 'object' || request === null || Array.isArray(request)) {
        throw new InputError('expected a JSON object { "id", "channel", "query", "limit"? }');
      }
      const fields = request as Record<string, unknown>;
      id = fields.id;
      if (typeof fields.channel !== 'string' || fields.channel.length === 0) {
        throw new InputError('"channel" must be a non-empty string');
      }
      const query = checkQuery(fields.query, '"query"');
      const limit = fields.limit === undefined ? undefined : checkLimit(fields.limit, '"limit"');
      const store = await storeFor(fields.channel);
      const results = await store.search({
        location: { channelId: fields.channel },
        query,
        ...(limit === undefined ? {} : { limit }),
        ...(filters.kind ? { kind: filters.kind } : {}),
        ...(filters.memoryType ? { memoryType: filters.memoryType } : {}),
      });
      io.stdout.write(`${JSON.stringify({ id: fields.id ?? null, results })}\n`);
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      failed += 1;
      const report: Record<string, unknown> = { line: lineNumber };
      if (id !== undefined) report.id = id;
      report.error = `line ${lineNumber}: ${error.message}`;
      io.stdout.write(`${JSON.stringify(report)}\n`);
    }
  }
  if (failed > 0) {
    io.stderr.write(`magpie memory search: ${failed} bad query line${failed === 1 ? '' : 's'} (see the error objects)\n`);
    return EXIT.failure;
  }
  return EXIT.ok;
}

async function listCommand(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseFlags(argv, {
    usage: LIST_USAGE,
    options: { ...COMMON_OPTIONS, channel: { type: 'string' }, kind: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' } },
  });
  if (parsed.help) {
    io.stdout.write(LIST_USAGE);
    return EXIT.ok;
  }
  const values = parsed.values;
  const kind = kindFlag(values.kind, LIST_USAGE);
  const limit = integerFlag(values.limit, '--limit', LIST_USAGE, { min: 1, max: 10_000 }) ?? 50;
  return withStores(values, io, {}, async (stores) => {
    // Across shards: the newest of all of them (a channel's entries live in one shard only).
    const targets = values.channel ? [await stores.forChannel(values.channel)] : await stores.all();
    const records = targets
      .flatMap((store) =>
        store.list({
          ...(values.channel ? { location: { channelId: values.channel } } : {}),
          ...(kind ? { kind } : {}),
          limit,
        }),
      )
      .sort((left, right) => right.createdAt - left.createdAt)
      .slice(0, limit);
    for (const record of records) {
      if (values.json) {
        io.stdout.write(`${JSON.stringify(record)}\n`);
      } else {
        const label = record.kind === 'memory' ? `${record.memoryType} ${record.importance?.toFixed(2)}` : 'transcript';
        io.stdout.write(
          `${record.id}  ${new Date(record.createdAt).toISOString()}  ${record.channelId}  ${label}\n  ${oneLine(record.content)}\n`,
        );
      }
    }
    if (!values.json && records.length === 0) io.stdout.write('(nothing stored)\n');
    return EXIT.ok;
  });
}

async function statsCommand(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseFlags(argv, {
    usage: STATS_USAGE,
    options: { ...COMMON_OPTIONS, channel: { type: 'string' }, json: { type: 'boolean' } },
  });
  if (parsed.help) {
    io.stdout.write(STATS_USAGE);
    return EXIT.ok;
  }
  const values = parsed.values;
  return withStores(values, io, {}, async (stores) => {
    const targets = values.channel ? [await stores.forChannel(values.channel)] : await stores.all();
    const stats = sumStats(targets.map((store) => store.stats(values.channel ? { channelId: values.channel } : undefined)));
    if (values.json) {
      io.stdout.write(`${JSON.stringify(stats)}\n`);
      return EXIT.ok;
    }
    const types = Object.entries(stats.byType)
      .map(([type, count]) => `${type} ${count}`)
      .join(', ');
    io.stdout.write(
      [
        `memories:           ${stats.memories}${types ? ` (${types})` : ''}`,
        `transcript entries: ${stats.transcriptEntries}`,
        `embedder:           ${stats.embedder} (dimension ${stats.dimension})`,
        `vectors:            ${stats.indexedVectors + stats.pendingVectors} stored: ${stats.indexedVectors} in the saved vector index, ${stats.pendingVectors} pending`,
        ...(stats.pendingVectors > 0
          ? ['                    (pending = stored in SQLite, found by an exact scan, joined to the index in the background once a search loads that index)']
          : []),
        '',
      ].join('\n'),
    );
    return EXIT.ok;
  });
}

/** The memory stores of a deployment's data dirs (one, or one per shard), opened on demand. */
interface StoreSet {
  /** The store of the shard holding this channel (the only store when unsharded). */
  forChannel(channelId: string): Promise<SqliteMemoryStore>;
  /** Every store: the base one or each shard's. */
  all(): Promise<SqliteMemoryStore[]>;
  /** The one store; a sharded data dir is refused with a hint naming the shard dirs. */
  only(what: string): Promise<SqliteMemoryStore>;
}

/**
 * Opens the data directory's databases and memory stores around `work` as it asks for them
 * (the data dir itself, or the `shard-<N>` dirs of a sharded bot), and closes them all. A data
 * directory without a database is an error: reading commands never create an empty one. Readers
 * open read-only (they work beside a running bot and on a read-only disk); `write` takes the
 * data dir's writer lock, so a writer running elsewhere refuses this command, naming itself.
 */
async function withStores(
  values: { 'data-dir'?: string | undefined; config?: string | undefined },
  io: CliIo,
  mode: { write?: boolean },
  work: (stores: StoreSet) => Promise<number>,
): Promise<number> {
  const { config } = loadConfig({ path: values.config, cwd: io.cwd, env: io.env });
  const dataDir = path.resolve(io.cwd, values['data-dir'] ?? config.memory.dataDir);
  const dirs = listStorage(config, dataDir, io.env);
  if (dirs.length === 0) {
    throw new MagpieError('no_data', `no Magpie data in ${dataDir} (${DATABASE_FILE} not found)`, {
      hint: 'pass --data-dir with a directory written by `magpie start`, `magpie chat` or `magpie replay`',
    });
  }
  // A damaged index file is never trusted; say so, since a reader rebuilds it in memory each run.
  const events = new EventStream();
  events.subscribe((event) => {
    if (event.type === 'memory_index_rebuild' && event.reason !== 'no saved index' && event.reason !== 'index file missing') {
      io.stderr.write(`warning: the vector index of ${String(event.index_key)} was not used (${String(event.reason)}); searching without it\n`);
    } else if (event.type === 'memory_index_path_moved') {
      io.stderr.write(`warning: ${String(event.path)} is ${String(event.reason)}; ${event.moved_to ? `moved to ${String(event.moved_to)}` : 'ignored'}\n`);
    }
  });
  const opened = new Map<string, { storage?: OpenedStorage; store?: SqliteMemoryStore }>();
  const open = async (entry: StorageEntry): Promise<SqliteMemoryStore> => {
    const existing = opened.get(entry.dir);
    if (existing?.store) return existing.store;
    const slot: { storage?: OpenedStorage; store?: SqliteMemoryStore } = {};
    opened.set(entry.dir, slot);
    try {
      slot.storage = mode.write
        ? openStorageForWriting(entry.target, ALL_MIGRATIONS, { command: 'magpie memory forget' })
        : openStorageForReading(entry.target, ALL_MIGRATIONS, { command: 'magpie memory' });
      const settings: MemorySettings = { ...config.memory, dataDir: entry.dir };
      slot.store = await openMemoryStore({ db: slot.storage.db, dataDir: entry.dir, settings, env: io.env, events, readOnly: !mode.write });
      return slot.store;
    } catch (error) {
      throw storageError(describeTarget(entry.target), error) ?? error;
    }
  };
  const byChannel = (channelId: string): StorageEntry => {
    if (dirs.length === 1) return dirs[0]!;
    const found = dataDirOfChannel(dataDir, channelId);
    return dirs.find((entry) => entry.dir === found?.dir) ?? dirs[0]!;
  };
  const stores: StoreSet = {
    forChannel: (channelId) => open(byChannel(channelId)),
    all: async () => {
      const all: SqliteMemoryStore[] = [];
      for (const entry of dirs) all.push(await open(entry));
      return all;
    },
    only: async (what) => {
      if (dirs.length > 1 || dirs[0]!.dir !== dataDir) {
        throw new MagpieError('sharded_data_dir', `${dataDir} holds ${dirs.length} shard data directories; ${what} works on one`, {
          hint: `pass --data-dir ${dirs.map((entry) => entry.dir).join(' or ')}`,
        });
      }
      return open(dirs[0]!);
    },
  };
  try {
    return await work(stores);
  } catch (error) {
    throw storageError(dataDir, error) ?? error;
  } finally {
    for (const slot of opened.values()) {
      try {
        await slot.store?.close();
      } catch (error) {
        io.stderr.write(`magpie memory: could not save the vector index: ${errorMessage(error)}\n`);
      }
      slot.storage?.close();
    }
  }
}

/** Counts of several shards added up (embedder and dimension are the deployment's own). */
function sumStats(all: MemoryStats[]): MemoryStats {
  const total: MemoryStats = { ...all[0]!, byType: { ...all[0]!.byType } };
  for (const stats of all.slice(1)) {
    total.memories += stats.memories;
    total.transcriptEntries += stats.transcriptEntries;
    total.indexedVectors += stats.indexedVectors;
    total.pendingVectors += stats.pendingVectors;
    for (const [type, count] of Object.entries(stats.byType) as Array<[MemoryType, number]>) {
      total.byType[type] = (total.byType[type] ?? 0) + count;
    }
  }
  return total;
}

/** "No results" for a channel that has nothing stored is usually a mistyped channel id. */
function warnIfUnknownChannel(store: SqliteMemoryStore, channelId: string, io: CliIo): void {
  const stats = store.stats({ channelId });
  if (stats.memories + stats.transcriptEntries > 0) return;
  const all = store.channelIds(1000);
  const known = all.slice(0, 20);
  // `magpie chat --channel local` stores its messages under `console:local`.
  // Under four characters every other short id is "one edit away": no guess then.
  const guess = all.find((id) => id.endsWith(`:${channelId}`)) ?? (channelId.length >= 4 ? closestMatch(channelId, all) : undefined);
  io.stderr.write(
    `note: nothing is stored for channel '${channelId}'` +
      (guess !== undefined ? `; did you mean '${guess}'?` : '') +
      (known.length > 0
        ? `; channels with data: ${known.join(', ')}${all.length > known.length ? ` and ${all.length - known.length} more` : ''}\n`
        : ' (the data directory is empty)\n'),
  );
}

function kindFlag(value: string | undefined, usage: string): MemoryKind | undefined {
  if (value === undefined) return undefined;
  if (value !== 'memory' && value !== 'transcript') throw new UsageError(`--kind must be memory or transcript, got '${value}'`, usage);
  return value;
}

function typeFlag(value: string | undefined, usage: string): MemoryType | undefined {
  if (value === undefined) return undefined;
  try {
    return checkMemoryType(value, '--type');
  } catch (error) {
    throw new UsageError(errorMessage(error), usage);
  }
}

function readInputFile(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new InputError(`cannot read queries file ${file}: ${errorMessage(error)}`);
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

function formatResults(results: SearchResult[]): string {
  if (results.length === 0) return '(no results)\n';
  return results
    .map((result, position) => {
      const label = result.kind === 'memory' ? `memory/${result.memory_type}` : 'transcript';
      const sources = result.source_ids.length > 0 ? `  sources ${result.source_ids.join(', ')}` : '';
      if (result.kind === 'transcript' && result.message_id !== undefined) {
        // Named by its platform message id, as people know it; the archive's own id is what
        // `memory forget` takes.
        const header = `${position + 1}. ${result.score.toFixed(3)}  ${label}  message ${result.message_id}  ${result.created_at}${sources}  (forget: ${result.id})`;
        return `${header}\n${transcriptLines(result)}\n`;
      }
      return `${position + 1}. ${result.score.toFixed(3)}  ${label}  ${result.id}  ${result.created_at}${sources}\n${indented(result.content)}\n`;
    })
    .join('');
}

function indented(text: string): string {
  return text
    .split('\n')
    .map((line) => `   ${line}`)
    .join('\n');
}

/** The matched message and its neighbours, one labelled line each, in the order they were written. */
function transcriptLines(result: SearchResult): string {
  const neighbors = result.neighbors ?? [];
  const line = (label: string, id: string, author: string, at: string, text: string): string =>
    indented(`${label.padEnd(6)} ${id}  ${at}  ${author}: ${text}`);
  const matchText = result.author && result.content.startsWith(`${result.author}: `) ? result.content.slice(result.author.length + 2) : result.content;
  return [
    ...neighbors.filter((item) => item.position === 'before').map((item) => line('before', item.message_id, item.author, item.created_at, item.content)),
    line('match', result.message_id ?? '', result.author ?? '', result.created_at, matchText),
    ...neighbors.filter((item) => item.position === 'after').map((item) => line('after', item.message_id, item.author, item.created_at, item.content)),
  ].join('\n');
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ');
  return flat.length > 160 ? `${flat.slice(0, 157)}...` : flat;
}
