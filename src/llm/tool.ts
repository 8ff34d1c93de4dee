import type { ToolDefinition } from './chat-model.js';

/** What a tool handler returns; `isError` results go back to the model as readable errors. */
export interface ToolOutcome {
  content: string;
  isError: boolean;
}

/** Who is calling a tool, so that handlers can scope what they read and write. */
export interface ToolContext {
  channelId: string;
  guildId?: string;
  /** For DMs: the user the DM belongs to. */
  dmUserId?: string;
  /** For threads: the channel it hangs off, whose settings apply when the thread has none. */
  parentChannelId?: string;
  /** Message ids the current work is about (the compaction range, the triggering message). */
  sourceMessageIds?: string[];
  /**
   * The messages a memory may be drawn from, when the work was given a fixed range (a
   * compaction worker): `memory_save` accepts only these ids as sources.
   */
  sourceCandidates?: ReadonlyArray<{ messageId: string; content: string }>;
  /** Otherwise, whether an id names a message of the caller's context (the channel's live context). */
  isKnownSource?: (messageId: string) => boolean;
  /** Message ids tool results have shown during this work (a search hit may be a source too). */
  seenSourceIds?: Set<string>;
  /** The same messages with the text shown, for a branch or worker that names no source. */
  seenSources?: Map<string, string>;
  /**
   * Who works under this context. A branch or a worker that saves a memory without naming its
   * sources gets those of what its tools showed that share its words, not the channel's trigger.
   */
  agent?: 'channel' | 'branch' | 'worker';
  signal?: AbortSignal;
  /**
   * Posts a message where the current work was asked for (on Discord, a reply to that
   * message) and returns its platform id: how a background worker reports back later.
   */
  postToChannel?: (text: string) => Promise<string | undefined>;
}

/**
 * A tool the model may call. `run` must never throw for bad input: it answers with
 * `{ isError: true }` and a message the model can act on.
 */
export interface ToolHandler {
  readonly definition: ToolDefinition;
  run(input: unknown, context: ToolContext): Promise<ToolOutcome> | ToolOutcome;
}

const definitionCache = new WeakMap<readonly ToolHandler[], ToolDefinition[]>();

/**
 * The definitions of a tool list, built once per list: the same array object comes back for
 * the same list, so whatever counts or caches definitions by identity (the channel estimate,
 * the server's prompt cache) sees one configuration, not a new one each turn.
 */
export function definitionsOf(tools: readonly ToolHandler[]): ToolDefinition[] {
  let definitions = definitionCache.get(tools);
  if (!definitions) {
    definitions = tools.map((tool) => tool.definition);
    definitionCache.set(tools, definitions);
  }
  return definitions;
}
