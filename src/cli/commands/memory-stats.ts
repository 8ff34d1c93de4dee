import type { MemoryStats, MemoryType } from '../../memory/types.js';
import { EXIT, type CliIo } from '../command.js';
import { parseFlags } from '../parse-flags.js';
import { COMMON_OPTIONS } from './memory-flags.js';
import { withStores } from './memory-stores.js';
import { jsonLine } from '../json-output.js';

const STATS_USAGE = `Usage: magpie memory stats [--data-dir DIR] [--channel ID] [--json]

Counts of memories by type and transcript entries, the embedder, and how many vectors are indexed.

Options:
  --data-dir DIR   data directory (default: $MAGPIE_DATA_DIR, else [memory] data_dir of the config)
  --channel ID     only what this channel may see
  --json           JSON output
  --config FILE    config file (default ./config.toml if present)
  -h, --help       show this help
`;

/** `magpie memory stats`: counts, embedder and index state, summed over the shards. */
export async function statsCommand(argv: string[], io: CliIo): Promise<number> {
  const parsed = parseFlags(argv, {
    usage: STATS_USAGE,
    options: { ...COMMON_OPTIONS, channel: { type: 'string' }, json: { type: 'boolean' } },
  });
  if (parsed.help) {
    io.stdout.write(STATS_USAGE);
    return EXIT.ok;
  }
  const values = parsed.values;
  return withStores(values, io, async (stores) => {
    const targets = values.channel ? [await stores.forChannel(values.channel)] : await stores.all();
    const stats = sumStats(await Promise.all(targets.map((store) => store.stats(values.channel ? { channelId: values.channel } : undefined))));
    if (values.json) {
      io.stdout.write(jsonLine(stats));
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
