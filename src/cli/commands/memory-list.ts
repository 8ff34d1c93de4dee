import { EXIT, type CliIo } from '../command.js';
import { integerFlag, parseFlags } from '../parse-flags.js';
import { COMMON_OPTIONS, kindFlag } from './memory-flags.js';
import { withStores } from './memory-stores.js';
import { jsonLine } from '../json-output.js';
import { terminalSafe } from '../terminal-text.js';

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

/** `magpie memory list`: the newest entries, across every shard. */
export async function listCommand(argv: string[], io: CliIo): Promise<number> {
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
  return withStores(values, io, async (stores) => {
    // Across shards: the newest of all of them (a channel's entries live in one shard only).
    const targets = values.channel ? [await stores.forChannel(values.channel)] : await stores.all();
    const lists = await Promise.all(
      targets.map((store) =>
        store.list({
          ...(values.channel ? { location: { channelId: values.channel } } : {}),
          ...(kind ? { kind } : {}),
          limit,
        }),
      ),
    );
    const records = lists
      .flat()
      .sort((left, right) => right.createdAt - left.createdAt)
      .slice(0, limit);
    for (const record of records) {
      if (values.json) {
        io.stdout.write(jsonLine(record));
      } else {
        const label = record.kind === 'memory' ? `${record.memoryType} ${record.importance?.toFixed(2)}` : 'transcript';
        io.stdout.write(
          `${record.id}  ${new Date(record.createdAt).toISOString()}  ${terminalSafe(record.channelId)}  ${label}\n  ${oneLine(record.content)}\n`,
        );
      }
    }
    if (!values.json && records.length === 0) io.stdout.write('(nothing stored)\n');
    return EXIT.ok;
  });
}

/** Stored text on one line: runs of white space as one space, other control characters shown (terminal-text.ts). */
function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ');
  return terminalSafe(flat.length > 160 ? `${flat.slice(0, 157)}...` : flat);
}
