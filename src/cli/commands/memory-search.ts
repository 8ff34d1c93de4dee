import { readFileSync } from 'node:fs';
import path from 'node:path';
import { errorMessage, InputError } from '../../common/errors.js';
import { closestMatch } from '../../config/edit-distance.js';
import type { SqlMemoryStore } from '../../memory/sql-memory-store.js';
import { MEMORY_TYPES, type MemoryKind, type MemoryType } from '../../memory/types.js';
import { checkLimit, checkQuery, MAX_SEARCH_LIMIT } from '../../memory/validation.js';
import { EXIT, type CliIo } from '../command.js';
import { integerFlag, parseFlags, requireFlag, UsageError } from '../parse-flags.js';
import { COMMON_OPTIONS, kindFlag, typeFlag } from './memory-flags.js';
import { formatResults } from './memory-search-format.js';
import { withStores } from './memory-stores.js';
import { jsonLine } from '../json-output.js';

const SEARCH_USAGE = `Usage: magpie memory search QUERY --channel ID [--data-dir DIR] [--limit K] [--kind memory|transcript] [--type TYPE] [--json]
       magpie memory search --queries FILE [--data-dir DIR] --json

Hybrid search (vectors + full text) over what the channel may see.

Options:
  --data-dir DIR     data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir)
  --channel ID       channel whose memory is searched (required for a single query)
  --limit K          results, 1 to ${MAX_SEARCH_LIMIT} (default 5)
  --kind KIND        only memory or only transcript results
  --type TYPE        only memories of this type:
                     ${MEMORY_TYPES.join(', ')}
  --queries FILE     JSON lines { "id", "channel", "query", "limit"? } ("-" reads stdin); prints one
                     line { "id", "results": [...] } per query, or { "line", "id"?, "error" } for a
                     bad line (the others still run; the exit code is then 1)
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
  if (values.queries !== undefined) {
    if (parsed.positionals.length > 0) throw new UsageError('give either QUERY or --queries FILE, not both', SEARCH_USAGE);
    if (!values.json) throw new UsageError('--queries needs --json (its output is JSON lines)', SEARCH_USAGE);
    const text = values.queries === '-' ? await readAll(io.stdin) : readInputFile(path.resolve(io.cwd, values.queries));
    return withStores(values, io, async (stores) => runBatch((channelId) => stores.forChannel(channelId), text, { kind, memoryType }, io));
  }
  const query = parsed.positionals[0];
  if (query === undefined) throw new UsageError('missing QUERY (or --queries FILE)', SEARCH_USAGE);
  const channelId = requireFlag(values.channel, '--channel', SEARCH_USAGE);
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

async function runBatch(
  storeFor: (channelId: string) => Promise<SqlMemoryStore>,
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
      io.stdout.write(jsonLine({ id: fields.id ?? null, results }));
    } catch (error) {
      if (!(error instanceof InputError)) throw error;
      failed += 1;
      const report: Record<string, unknown> = { line: lineNumber };
      if (id !== undefined) report.id = id;
      report.error = `line ${lineNumber}: ${error.message}`;
      io.stdout.write(jsonLine(report));
    }
  }
  if (failed > 0) {
    io.stderr.write(`magpie memory search: ${failed} bad query line${failed === 1 ? '' : 's'} (see the error objects)\n`);
    return EXIT.failure;
  }
  return EXIT.ok;
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
  io.stderr.write(
    `note: nothing is stored for channel '${channelId}'` +
      (guess !== undefined ? `; did you mean '${guess}'?` : '') +
      (known.length > 0
        ? `; channels with data: ${known.join(', ')}${all.length > known.length ? ` and ${all.length - known.length} more` : ''}\n`
        : ' (the data directory is empty)\n'),
  );
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
