import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
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
import type { ReplyStream } from '../app/channel-responder.js';
import { clearPersona, describeMyMemories, describePersona, setPersona } from '../app/user-commands.js';
import { resolveAttachments } from '../attachments/resolve-attachments.js';
import { errorMessage } from '../common/errors.js';
import { attachmentEvent } from '../attachments/attachment-event.js';
import { storageError } from '../storage/storage-error.js';
import { terminalSafeLines } from './terminal-text.js';

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
  /memory mine         what Magpie remembers from your own messages
  /memory forget ID    forget one memory
  /attach PATH [TEXT]  send an image (PNG, JPEG, GIF, WebP) or a text file, with an optional message
  /persona             show this channel's persona
  /persona set TEXT    give this channel its own persona (stored in the data directory)
  /persona clear       go back to the configured persona
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
      // A `/compact` whose range is too small to gain anything is skipped before any worker starts.
      const failed = event.type === 'compaction_failed' || (event.type === 'compaction_skipped' && event.tier === 'manual');
      if (failed) notices.write(`(a compaction did not apply: ${String(event.reason ?? 'failed')}; the history is unchanged)\n`);
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
    const waiting = new LineQueue(lines);
    let quit = false;
    try {
      this.showPrompt();
      while ((await waiting.ready()) && !this.stopping) {
        const keepGoing = await this.handleLine(waiting.take().trim());
        if (!keepGoing || this.stopping) {
          quit = true;
          break;
        }
        this.showPrompt();
      }
      // Lines typed while a reply (or a slow write) was in progress, then Ctrl-C or SIGTERM:
      // they were never stored or answered, and the user should not think they were.
      const unsent = waiting.drop();
      if (this.stopping && unsent > 0) {
        notices.write(`(${unsent === 1 ? '1 line typed after the last one handled was' : `${unsent} lines typed after the last one handled were`} not sent)\n`);
      }
      // Piped input has ended: a script that started a worker wants its report, so wait for it.
      if (!quit && !this.stopping && !this.options.prompt) await app.workers.idle(this.channelId);
    } finally {
      lines.close();
      unsubscribe();
    }
  }

  /** Stops reading input (Ctrl-C, SIGTERM): the loop ends once the line being handled is done. */
  stop(): void {
    this.stopping = true;
    this.lines?.close();
  }

  /**
   * A command's answer: it quotes stored messages, memories and personas, which anyone in a
   * channel may have written, so control characters are shown, not obeyed (terminal-text.ts).
   */
  private print(text: string): void {
    this.options.output.write(terminalSafeLines(text));
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
      // A command (/context, /memory search...) sent no message: only /attach does.
      const command = line.startsWith('/') ? line.split(/\s+/)[0]! : undefined;
      const lost = command === undefined || command === '/attach' ? 'this message was not stored; send it again' : `${command} did not complete; try it again`;
      this.options.notices.write(`error: ${problem ? `${problem.render()}\n  (${lost})` : errorMessage(error)}\n`);
    }
    return true;
  }

  private async handleCommand(line: string): Promise<boolean> {
    const { app } = this.options;
    const deps = { runtime: app.runtime, memory: app.memory, events: app.events, workers: app.workers };
    const [command, ...rest] = line.split(/\s+/);
    switch (command) {
      case '/quit':
      case '/exit':
        return false;
      case '/help':
        this.print(COMMAND_HELP);
        return true;
      case '/context':
        this.print(`${describeContext(await app.runtime.status(this.channelId))}\n`);
        return true;
      case '/compact':
        this.print(`${await startCompaction(deps, this.channelId)}\n`);
        return true;
      case '/memory': {
        const [sub, ...words] = rest;
        const text = words.join(' ');
        if (sub === 'search') this.print(`${await searchMemory(deps, { channelId: this.channelId }, text)}\n`);
        else if (sub === 'mine') this.print(`${await describeMyMemories(deps, app.runtime, { channelId: this.channelId }, CONSOLE_USER)}\n`);
        else if (sub === 'forget') this.print(`${await forgetMemory(deps, { channelId: this.channelId }, text)}\n`);
        else this.print('Use /memory search TEXT, /memory mine or /memory forget ID.\n');
        return true;
      }
      case '/persona': {
        const [sub, ...words] = rest;
        if (sub === undefined || sub === 'show') this.print(`${describePersona(app.runtime, this.channelId, app.config.file)}\n`);
        else if (sub === 'set') this.print(`${await setPersona(app.runtime, this.channelId, words.join(' '), CONSOLE_USER)}\n`);
        else if (sub === 'clear') this.print(`${await clearPersona(app.runtime, this.channelId)}\n`);
        else this.print('Use /persona, /persona set TEXT or /persona clear.\n');
        return true;
      }
      case '/attach':
        await this.handleAttach(line.slice(command!.length).trim());
        return true;
      case '/tasks': {
        const [sub, ...words] = rest;
        if (sub === undefined || sub === 'list') this.print(`${await listTasks(deps, this.channelId)}\n`);
        else if (sub === 'cancel') this.print(`${cancelTask(deps, this.channelId, words.join(' '), this.options.userName)}\n`);
        else this.print('Use /tasks or /tasks cancel ID.\n');
        return true;
      }
      default:
        this.print(`Unknown command ${command}. ${COMMAND_HELP}`);
        return true;
    }
  }

  /**
   * `/attach PATH [TEXT]`: the file goes with a message, as a Discord attachment would (the
   * same limits and placeholders). A path with spaces can be quoted.
   */
  private async handleAttach(argument: string): Promise<void> {
    const { app, notices } = this.options;
    const quoted = /^"([^"]+)"\s*(.*)$/.exec(argument) ?? /^'([^']+)'\s*(.*)$/.exec(argument);
    const [filePath, text] = quoted ? [quoted[1]!, quoted[2]!] : [argument.split(/\s+/)[0] ?? '', argument.split(/\s+/).slice(1).join(' ')];
    if (filePath === '') {
      notices.write('Usage: /attach PATH [message]  (an image: PNG, JPEG, GIF, WebP; or a text file)\n');
      return;
    }
    const resolvedPath = path.resolve(filePath);
    let data: Buffer;
    try {
      const info = await stat(resolvedPath);
      if (!info.isFile()) {
        notices.write(`cannot attach ${filePath}: not a file\n`);
        return;
      }
      if (info.size > MAX_ATTACH_BYTES) {
        notices.write(`cannot attach ${filePath}: ${info.size} bytes is more than the ${MAX_ATTACH_BYTES} accepted\n`);
        return;
      }
      data = await readFile(resolvedPath);
    } catch (error) {
      notices.write(`cannot attach ${filePath}: ${(error as NodeJS.ErrnoException).code ?? errorMessage(error)}\n`);
      return;
    }
    const name = path.basename(resolvedPath);
    const settings = app.config.settingsFor(this.channelId);
    const files = await resolveAttachments([{ name, size: data.length, data }], {
      vision: settings.vision,
      maxImages: settings.maxImagesPerMessage,
      maxChars: settings.maxAttachmentChars,
    });
    await this.handleMessage(text.trim() === '' ? `[attachment: ${name}]` : `${text.trim()}\n[attachment: ${name}]`, async (messageId) => {
      await app.runtime.attachFiles(this.channelId, messageId, files);
      app.events.emit(attachmentEvent(this.channelId, files));
      const file = files[0]!;
      notices.write(file.kind === 'file' ? `(attached ${name} as a placeholder${file.note ? `: ${file.note}` : ''})\n` : `(attached ${name}: the model sees it, about ${file.tokens} tokens)\n`);
    });
  }

  private async handleMessage(content: string, beforeTurn?: (messageId: string) => Promise<void>): Promise<void> {
    const { app, output } = this.options;
    this.sequence += 1;
    const entry = await app.runtime.ingest({
      messageId: `console-${Date.now()}-${this.sequence}`,
      channelId: this.channelId,
      authorId: CONSOLE_USER,
      authorName: this.options.userName,
      role: 'user',
      content,
      createdAt: Date.now(),
    });
    // Stored: a failure before this one is over (/readyz says ready again).
    app.storage.reportSuccess();
    await beforeTurn?.(entry.messageId);
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
          output.write(`magpie: ${terminalSafeLines(text)}\n`);
          return `console-reply-${Date.now()}-${this.sequence}-${replyCount}`;
        },
        stream: () => {
          replyCount += 1;
          return new ConsoleStream(output, `console-reply-${Date.now()}-${this.sequence}-${replyCount}`);
        },
      },
    });
  }
}

const CONSOLE_USER = 'console-user';

/** Lines read ahead past this many pause the input (a large piped script is not read whole into memory). */
const READ_AHEAD_LINES = 1_000;

/**
 * The lines read from input and not yet handled, in order. Unlike readline's async iterator it
 * can say how many were left behind when the chat stops early.
 */
class LineQueue {
  private readonly lines: string[] = [];
  private ended = false;
  private paused = false;
  private wake: (() => void) | undefined;

  constructor(private readonly source: ReturnType<typeof createInterface>) {
    source.on('line', (line) => {
      this.lines.push(line);
      if (this.lines.length >= READ_AHEAD_LINES && !this.paused) {
        this.paused = true;
        source.pause();
      }
      this.wake?.();
    });
    source.on('close', () => {
      this.ended = true;
      this.wake?.();
    });
  }

  /** Waits for a line; false once the input has ended (or was closed) and none is left. */
  async ready(): Promise<boolean> {
    while (this.lines.length === 0 && !this.ended) await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = undefined;
    return this.lines.length > 0;
  }

  /** The next line (after `ready` said there is one). */
  take(): string {
    const line = this.lines.shift() ?? '';
    if (this.paused && this.lines.length < READ_AHEAD_LINES / 2 && !this.ended) {
      this.paused = false;
      this.source.resume();
    }
    return line;
  }

  /** Forgets the lines not yet handled and says how many there were. */
  drop(): number {
    const count = this.lines.length;
    this.lines.length = 0;
    return count;
  }
}
/** Files larger than this are refused before reading (the model takes far less anyway). */
const MAX_ATTACH_BYTES = 20 * 1024 * 1024;

/**
 * A streamed reply in the terminal: text is printed as it arrives. A terminal cannot take back
 * what it printed, so only what extends the text is written; a final text that is not an
 * extension of what was shown (rare) is printed whole on a new line.
 */
class ConsoleStream implements ReplyStream {
  private printed = '';
  private done = false;

  constructor(
    private readonly output: Writable,
    private readonly id: string,
  ) {}

  get firstMessageId(): string | undefined {
    return this.printed === '' ? undefined : this.id;
  }

  update(text: string): void {
    if (this.done) return;
    this.extend(text);
  }

  async finish(text: string): Promise<string | undefined> {
    if (this.done) return this.id;
    this.done = true;
    if (this.printed === '' || text.startsWith(this.printed)) this.extend(text);
    else this.output.write(`\nmagpie: ${terminalSafeLines(text)}`);
    this.output.write('\n');
    return this.id;
  }

  async fail(note: string): Promise<boolean> {
    if (this.done) return false;
    this.done = true;
    if (this.printed === '') return false;
    this.output.write(`\n${note}\n`);
    return true;
  }

  private extend(text: string): void {
    if (!text.startsWith(this.printed)) return;
    const rest = text.slice(this.printed.length);
    if (rest === '') return;
    // A reply may quote what others wrote: shown, not obeyed (terminal-text.ts).
    const shown = terminalSafeLines(rest);
    this.output.write(this.printed === '' ? `magpie: ${shown}` : shown);
    this.printed = text;
  }
}
