import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import {
  cancelTask,
  describeContext,
  forgetMemory,
  listTasks,
  MODEL_HINT,
  searchMemory,
  startCompaction,
  type MagpieApp,
} from '../app/index.js';
import { errorMessage } from '../common/errors.js';
import { storageError } from '../storage/storage-error.js';

export interface ConsoleAdapterOptions {
  app: MagpieApp;
  /** The channel is `console:<name>`, so terminal chats never mix with Discord channels. */
  channelName: string;
  userName: string;
  input: Readable;
  output: Writable;
  /** Notices (compactions, missing model) go here, replies to `output`. */
  notices: Writable;
  /** Show a prompt (interactive terminals only). */
  prompt?: boolean;
}

const COMMAND_HELP = `Commands:
  /context             how full the context window is, and the last compaction
  /compact             compact the history now, in the background
  /memory search TEXT  search memories and past messages
  /memory forget ID    forget one memory
  /tasks               background workers running here
  /tasks cancel ID     stop one worker
  /quit                leave (Ctrl-D and Ctrl-C work too)
`;

/**
 * The same channel runtime and agent turn as the bot, in a terminal: every line is a message
 * from the local user, replies are printed. Works with piped input, one line at a time, so a
 * script can hold a whole conversation.
 */
export class ConsoleAdapter {
  private readonly channelId: string;
  private sequence = 0;
  private lines: ReturnType<typeof createInterface> | undefined;
  private stopping = false;

  constructor(private readonly options: ConsoleAdapterOptions) {
    this.channelId = `console:${options.channelName}`;
  }

  async run(): Promise<void> {
    const { app, notices } = this.options;
    const unsubscribe = app.events.subscribe((event) => {
      if (event.channel_id !== this.channelId) return;
      if (event.type === 'compaction_completed') notices.write(`(compacted older messages into a summary: ${String(event.tier ?? '')})\n`);
      // In the terminal the user is the operator too: say why the model did not answer.
      if (event.type === 'agent_turn_failed') notices.write(`(the model call failed: ${String(event.error ?? event.code ?? 'unknown error')})\n`);
      if (event.type === 'compaction_failed') notices.write(`(a compaction did not apply: ${String(event.reason ?? 'failed')}; the history is unchanged)\n`);
      if (event.type === 'worker_started') notices.write(`(worker ${String(event.worker_id)} started in the background; /tasks lists it)\n`);
      if (event.type === 'emergency_truncation') notices.write('(context was full: the oldest messages were set aside; memory_search still finds them)\n');
    });
    notices.write(`Magpie in the terminal, channel ${this.channelId}. Type /help for commands.\n`);
    if (!app.model) {
      const named = app.config.current().llm.model.trim();
      // A model that is named but cannot be used (no key) needs its own fix, not "configure one".
      notices.write(
        named !== '' && app.modelProblem
          ? `The model ${named} cannot be used, so Magpie will not answer: ${app.modelProblem.render()}\n` +
              'It still records and indexes what you write, and the commands work.\n'
          : `No model is configured, so Magpie will not answer; it still records and indexes what you write, and the commands work.\n` +
              `To get answers: ${MODEL_HINT}.\n`,
      );
    }
    const lines = createInterface({ input: this.options.input, terminal: false, crlfDelay: Infinity });
    this.lines = lines;
    let quit = false;
    try {
      this.showPrompt();
      for await (const line of lines) {
        if (this.stopping) break;
        const keepGoing = await this.handleLine(line.trim());
        if (!keepGoing || this.stopping) {
          quit = true;
          break;
        }
        this.showPrompt();
      }
      // Piped input has ended: a script that started a worker wants its report, so wait for it.
      if (!quit && !this.stopping && !this.options.prompt) await app.workers.idle(this.channelId);
    } finally {
      lines.close();
      unsubscribe();
    }
  }

  /** Stops reading input (Ctrl-C): the loop ends once the line being handled is done. */
  stop(): void {
    this.stopping = true;
    this.lines?.close();
  }

  private showPrompt(): void {
    if (this.options.prompt) this.options.output.write('> ');
  }

  /** Returns false when the user wants to leave. */
  private async handleLine(line: string): Promise<boolean> {
    if (line === '') return true;
    try {
      if (line.startsWith('/')) return await this.handleCommand(line);
      await this.handleMessage(line);
    } catch (error) {
      // A message that could not be stored is not answered; say what is wrong with the data dir.
      const problem = storageError(this.options.app.dataDir, error);
      if (problem) this.options.app.storage.reportFailure(problem);
      this.options.notices.write(`error: ${problem ? `${problem.render()}\n  (this message was not stored; send it again)` : errorMessage(error)}\n`);
    }
    return true;
  }

  private async handleCommand(line: string): Promise<boolean> {
    const { app, output } = this.options;
    const deps = { runtime: app.runtime, memory: app.memory, events: app.events, workers: app.workers };
    const [command, ...rest] = line.split(/\s+/);
    switch (command) {
      case '/quit':
      case '/exit':
        return false;
      case '/help':
        output.write(COMMAND_HELP);
        return true;
      case '/context':
        output.write(`${describeContext(app.runtime.status(this.channelId))}\n`);
        return true;
      case '/compact':
        output.write(`${await startCompaction(deps, this.channelId)}\n`);
        return true;
      case '/memory': {
        const [sub, ...words] = rest;
        const text = words.join(' ');
        if (sub === 'search') output.write(`${await searchMemory(deps, { channelId: this.channelId }, text)}\n`);
        else if (sub === 'forget') output.write(`${await forgetMemory(deps, { channelId: this.channelId }, text)}\n`);
        else output.write('Use /memory search TEXT or /memory forget ID.\n');
        return true;
      }
      case '/tasks': {
        const [sub, ...words] = rest;
        if (sub === undefined || sub === 'list') output.write(`${listTasks(deps, this.channelId)}\n`);
        else if (sub === 'cancel') output.write(`${cancelTask(deps, this.channelId, words.join(' '), this.options.userName)}\n`);
        else output.write('Use /tasks or /tasks cancel ID.\n');
        return true;
      }
      default:
        output.write(`Unknown command ${command}. ${COMMAND_HELP}`);
        return true;
    }
  }

  private async handleMessage(content: string): Promise<void> {
    const { app, output } = this.options;
    this.sequence += 1;
    const entry = await app.runtime.ingest({
      messageId: `console-${Date.now()}-${this.sequence}`,
      channelId: this.channelId,
      authorId: 'console-user',
      authorName: this.options.userName,
      role: 'user',
      content,
      createdAt: Date.now(),
    });
    if (!app.responder.hasModel) return;
    let replyCount = 0;
    await app.responder.respond({
      channelId: this.channelId,
      userId: 'console-user',
      turnId: entry.turnId,
      rateLimit: false,
      context: { channelId: this.channelId, sourceMessageIds: [entry.messageId] },
      target: {
        send: async (text) => {
          replyCount += 1;
          output.write(`magpie: ${text}\n`);
          return `console-reply-${Date.now()}-${this.sequence}-${replyCount}`;
        },
      },
    });
  }
}
