import os from 'node:os';
import { openApp } from '../../app/index.js';
import { EventStream } from '../../common/events.js';
import { loadConfig, watchConfigFile } from '../../config/index.js';
import { databaseProblem, openOperatorEndpoint, storageState } from '../../metrics/index.js';
import { checkStorageEnvironment } from '../../storage/open-storage.js';
import { EXIT, type CliCommand, type CliIo } from '../command.js';
import { COMMAND_SUMMARIES } from '../command-summaries.js';
import { ConsoleAdapter } from '../console-adapter.js';
import { noticeLogger } from '../notice-logger.js';
import { parseFlags, UsageError } from '../parse-flags.js';
import { idProblem } from '../../common/outside-text.js';

const USAGE = `Usage: magpie chat [--channel NAME] [--config FILE] [--data-dir DIR]

Talks to Magpie in the terminal: the same channel runtime, memory and compaction as the bot,
in the channel console:NAME. Every line you type is a message; input may be piped. Replies
are printed as they are written ([defaults] stream_replies = false prints them when complete).

Commands inside the chat:
  /context             how full the context window is, and the last compaction
  /compact             compact the history now, in the background
  /memory search TEXT  search memories and past messages
  /memory mine         what Magpie remembers from your own messages
  /memory forget ID    forget one memory
  /attach PATH [TEXT]  send an image (PNG, JPEG, GIF, WebP) or a text file with a message
  /persona [set TEXT | clear]  show or change this channel's persona (kept in the data dir)
  /quit                leave (Ctrl-D and Ctrl-C work too)

Options:
  --channel NAME  channel name (default: local); history is kept per channel
  --config FILE   configuration file (default: ./config.toml if present, else built-in defaults)
  --data-dir DIR  data directory (overrides [memory] data_dir)
  -h, --help      show this help

The config file is followed while you chat: a saved edit (a smaller context_window, other
thresholds) applies from the next message, and an invalid one is refused with its problems.
Metrics and health are served on [metrics] listen, as for 'magpie start'.

Without a model configured Magpie records and indexes what you write but does not answer:
set ANTHROPIC_API_KEY and [llm] model, or [llm] base_url of any Anthropic-compatible server
(a local llama.cpp or Ollama).
`;

export const chatCommand: CliCommand = {
  name: 'chat',
  summary: COMMAND_SUMMARIES.chat,
  async run(argv: string[], io: CliIo): Promise<number> {
    const parsed = parseFlags(argv, {
      usage: USAGE,
      options: { channel: { type: 'string' }, config: { type: 'string' }, 'data-dir': { type: 'string' } },
    });
    if (parsed.help) {
      io.stdout.write(USAGE);
      return EXIT.ok;
    }
    const channelName = (parsed.values.channel ?? 'local').trim() || 'local';
    // The name is a channel id (console:NAME): one holding a control character could not be
    // stored, and would reach the terminal raw in every notice that names the channel.
    const problem = idProblem(channelName);
    if (problem) throw new UsageError(`--channel ${problem}`, USAGE);
    const loaded = loadConfig({ path: parsed.values.config, cwd: io.cwd, env: io.env });
    const config = loaded.config;
    // PostgreSQL without its URL: refused before the metrics endpoint opens.
    checkStorageEnvironment(config, io.env);
    const events = new EventStream();
    const dataDir = parsed.values['data-dir'];
    const operator = await openOperatorEndpoint({ listen: config.metrics.listen, events });
    let app: Awaited<ReturnType<typeof openApp>>;
    try {
      app = await openApp({ config, ...(loaded.found ? { configFile: loaded.path } : {}), env: io.env, cwd: io.cwd, events, command: 'magpie chat', metrics: operator.metrics, ...(dataDir ? { dataDir } : {}) });
    } catch (error) {
      await operator.close();
      throw error;
    }
    const opened = app;
    operator.readiness.require('database', () => databaseProblem(opened));
    operator.readiness.describe('storage', () => storageState(opened));
    const notices = noticeLogger(io.stderr);
    if (operator.problem) notices.warn({ hint: operator.problem.hint }, `metrics are off: ${operator.problem.message}`);
    // Tuning in the terminal gives feedback at once: a saved edit applies from the next check.
    const watcher = loaded.found ? watchConfigFile({ path: loaded.path, live: app.config, logger: notices, env: io.env }) : undefined;
    try {
      const adapter = new ConsoleAdapter({
        app,
        channelName,
        userName: io.env.USER?.trim() || os.userInfo().username || 'you',
        input: io.stdin,
        output: io.stdout,
        notices: io.stderr,
        prompt: (io.stdin as { isTTY?: boolean }).isTTY === true,
      });
      // Ctrl-C (or SIGTERM from a supervisor) leaves like /quit, cancelling a reply still being
      // thought about, so the data dir is closed cleanly; a second one quits at once.
      const leave = (signal: NodeJS.Signals) => {
        io.stderr.write(`\n(leaving${signal === 'SIGTERM' ? ' on SIGTERM' : ''}; press Ctrl-C again to quit at once)\n`);
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
        process.once('SIGINT', () => process.exit(130));
        process.once('SIGTERM', () => process.exit(143));
        adapter.stop();
        void app.responder.drain(0);
      };
      const onInt = () => leave('SIGINT');
      const onTerm = () => leave('SIGTERM');
      process.once('SIGINT', onInt);
      process.once('SIGTERM', onTerm);
      try {
        await adapter.run();
        await app.responder.drain(app.config.current().discord.shutdownGraceMs);
      } finally {
        process.off('SIGINT', onInt);
        process.off('SIGTERM', onTerm);
      }
    } finally {
      watcher?.close();
      await app.close();
      await operator.close();
    }
    return EXIT.ok;
  },
};
