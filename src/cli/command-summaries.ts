/**
 * The top-level commands and their one-line summaries, in the order `magpie --help` lists them.
 * Kept apart from the commands themselves so that the help needs none of them loaded (`start`
 * alone pulls in discord.js and the store: a second of CPU for a list of names).
 */
export const COMMAND_SUMMARIES = {
  start: 'run the Discord bot',
  chat: 'chat with Magpie in the terminal (no Discord needed)',
  replay: 'feed a JSONL transcript through the channel runtime and report compaction',
  memory: 'search, list, forget and count what Magpie remembers',
  config: 'check a config file: config check [FILE]',
  status: "each channel's usage, summaries, archive, memories and last compaction",
  report: 'write an HTML tuning report of what compaction did (compare data dirs)',
  export: "write a Discord channel's history as a replay transcript",
  migrate: 'copy a SQLite data dir (and its shard dirs) into PostgreSQL, verified',
} as const;
