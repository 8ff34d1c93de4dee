import { closeSync, existsSync, openSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { MagpieError } from '../../common/errors.js';
import { snowflakeProblem, SNOWFLAKE_RULE } from '../../common/snowflake.js';
import { loadConfig } from '../../config/index.js';
import { ExportProgress } from '../../export/export-progress.js';
import { transcriptLineFrom } from '../../export/transcript-from-discord.js';
import { DISCORD_API_ENV, EXIT, type CliCommand, type CliIo } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { integerFlag, parseFlags, requireFlag, UsageError } from '../parse-flags.js';

const USAGE = `Usage: magpie export --channel ID --out FILE.jsonl [--after ID] [--limit N] [--config FILE]

Reads a Discord channel's history with the bot's token and writes it, oldest first, in the
replay format ({ "id", "channel", "author", "content", "ts", "role" } a line; the bot's own
messages are "assistant"), so that 'magpie replay FILE.jsonl' can try settings on it.

Options:
  --channel ID    the channel (or thread) id: Developer Mode, right-click it, Copy Channel ID
  --out FILE      where to write the transcript ('-' = stdout); an existing file is replaced
  --after ID      start after this message id (continue an export: the last id it wrote)
  --limit N       stop after N messages (default: the whole channel)
  --config FILE   configuration file, for [discord] token_env (default ./config.toml if present)
  -h, --help      show this help

The bot must be in the server with View Channel and Read Message History. Discord's rate
limits are respected (the export waits when asked to). Progress goes to stderr when it is a
terminal.

Environment:
  DISCORD_TOKEN       the bot token (the name is set by [discord] token_env)
  MAGPIE_DISCORD_API  another Discord REST base URL (default: Discord's own)
`;

/** A Discord id flag as a snowflake, or a usage error saying what a snowflake is. */
function snowflakeFlag(value: string, flag: string, what: string): string {
  const problem = snowflakeProblem(value);
  if (problem === undefined) return value;
  throw new UsageError(`${flag} needs a Discord ${what} id, ${SNOWFLAKE_RULE}; '${shorten(value)}' ${problem}`, USAGE);
}

export const exportCommand: CliCommand = {
  name: 'export',
  summary: COMMAND_SUMMARIES.export,
  async run(argv: string[], io: CliIo): Promise<number> {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: {
        channel: { type: 'string' },
        out: { type: 'string' },
        after: { type: 'string' },
        limit: { type: 'string' },
        config: { type: 'string' },
      },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const channelId = snowflakeFlag(requireFlag(parsed.values.channel, '--channel', USAGE).trim(), '--channel', 'channel');
    const after = parsed.values.after?.trim();
    const afterId = after === undefined ? undefined : snowflakeFlag(after, '--after', 'message');
    const limit = integerFlag(parsed.values.limit, '--limit', USAGE, { min: 1 });
    const out = requireFlag(parsed.values.out, '--out', USAGE);
    const target = out === '-' ? undefined : path.resolve(io.cwd, out);
    if (target !== undefined && existsSync(target) && statSync(target).isDirectory()) {
      throw new UsageError(`--out is a directory: ${target}; name a file such as ${path.join(out, `${channelId}.jsonl`)}`, USAGE);
    }
    // Checked before Discord is asked anything: the file is opened only after the first page.
    if (target !== undefined && !isDirectory(path.dirname(target))) {
      throw new UsageError(`--out ${out}: the directory ${path.dirname(target)} does not exist (it is not created); create it or name a file in a directory that exists`, USAGE);
    }
    const config = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env }).config;
    const token = io.env[config.discord.tokenEnv]?.trim() ?? '';
    if (token === '') {
      io.stderr.write(
        `magpie export: no Discord bot token: the environment variable ${config.discord.tokenEnv} is not set.\n` +
          `  hint: ${config.discord.tokenEnv}=<token> npx magpie export --channel ${channelId} --out ${out}\n`,
      );
      return EXIT.config;
    }
    const api = io.env[DISCORD_API_ENV]?.trim();
    return runExport({ io, channelId, afterId, limit, target, token, ...(api ? { api } : {}) });
  },
};

async function runExport(options: {
  io: CliIo;
  channelId: string;
  afterId: string | undefined;
  limit: number | undefined;
  target: string | undefined;
  token: string;
  api?: string;
}): Promise<number> {
  const { io, limit } = options;
  const progress = new ExportProgress(io.stderr);
  // discord.js loads here, once the flags and the token are known to be there.
  const { DiscordHistoryReader } = await import('../../export/discord-history.js');
  const reader = new DiscordHistoryReader({
    token: options.token,
    ...(options.api ? { api: options.api } : {}),
    onRateLimit: ({ retryAfterMs }) => progress.rateLimited(retryAfterMs),
  });
  const selfId = await reader.selfId();
  // Opened only once Discord has accepted the token, so a refused export leaves no empty file.
  let descriptor: number | undefined;
  const write = (text: string): void => {
    if (options.target === undefined) io.stdout.write(text);
    else {
      descriptor ??= openSync(options.target, 'w');
      writeSync(descriptor, text);
    }
  };
  let written = 0;
  let skipped = 0;
  let lastId: string | undefined;
  try {
    try {
      pages: for await (const page of reader.pagesAfter(options.channelId, options.afterId)) {
        let text = '';
        for (const message of page) {
          if (limit !== undefined && written >= limit) break;
          lastId = message.id;
          const line = transcriptLineFrom(message, selfId);
          if (!line) {
            skipped += 1;
            continue;
          }
          text += `${JSON.stringify(line)}\n`;
          written += 1;
        }
        write(text);
        progress.update(written);
        if (limit !== undefined && written >= limit) break pages;
      }
      if (descriptor === undefined && options.target !== undefined) write('');
    } catch (error) {
      progress.finish();
      if (error instanceof MagpieError && written > 0) {
        io.stderr.write(
          `magpie export: ${error.render()}\n  (${written} messages were written; run again with --after ${lastId} and another --out to continue)\n`,
        );
        return EXIT.failure;
      }
      throw error;
    }
  } finally {
    if (descriptor !== undefined) closeSync(descriptor);
  }
  progress.finish();
  const where = options.target ?? 'stdout';
  io.stderr.write(
    `exported ${written} message${written === 1 ? '' : 's'} from channel ${options.channelId} to ${where}` +
      (skipped > 0 ? ` (${skipped} system or empty message${skipped === 1 ? '' : 's'} left out)` : '') +
      (lastId !== undefined ? `; last id ${lastId}` : '') +
      '\n',
  );
  return EXIT.ok;
}

function isDirectory(directory: string): boolean {
  try {
    return statSync(directory).isDirectory();
  } catch {
    return false;
  }
}

function shorten(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
