import { EXIT, type CliCommand } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { unknownSubcommand, UsageError } from '../parse-flags.js';
import { forgetCommand } from './memory-forget.js';
import { listCommand } from './memory-list.js';
import { searchCommand } from './memory-search.js';
import { statsCommand } from './memory-stats.js';

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

/** `magpie memory ...`: search, list, forget and stats over a data directory. */
export const memoryCommand: CliCommand = {
  name: 'memory',
  summary: COMMAND_SUMMARIES.memory,
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
        throw unknownSubcommand(subcommand, ['search', 'list', 'forget', 'stats'], USAGE);
    }
  },
};
