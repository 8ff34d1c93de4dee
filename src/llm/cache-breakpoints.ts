import type {
  ContentBlockParam,
  MessageCreateParamsNonStreaming,
  MessageParam,
  TextBlockParam,
  Tool,
} from '@anthropic-ai/sdk/resources/messages';

/** The lifetime asked of the prompt cache. */
export type CacheLifetime = '5m' | '1h';

/** The API takes at most this many `cache_control` blocks in one request. */
export const MAX_BREAKPOINTS = 4;

/** An image's tokens for the minimum-length check (a large one is about this many). */
const IMAGE_TOKENS = 1_600;

export interface CachePlacement {
  lifetime: CacheLifetime;
  /** Prefixes shorter than this (estimated tokens) are not cached by the model: no breakpoint. */
  minTokens: number;
  /** Offsets in the system prompt where its stable parts end (`ModelRequest.systemBreaks`). */
  systemBreaks?: readonly number[];
}

/** Which breakpoints a request got, in prefix order (for tests and logs). */
export type BreakpointKind = 'tools_and_system' | 'summaries' | 'previous_turn' | 'turn';

interface Candidate {
  kind: BreakpointKind;
  /** Estimated tokens of the prefix that ends at the marked block. */
  prefixTokens: number;
  /** Puts the mark; false when the block cannot carry one. */
  mark: () => boolean;
}

/**
 * Marks the request's stable prefix for the prompt cache, in place. Up to four breakpoints,
 * each only where the prefix before it is long enough to be cached:
 * - after the tools and the system prompt, which do not change from turn to turn;
 * - after the stacked summaries (each summary is a block of its own, so when a new one is
 *   appended the 20-block lookback still finds the earlier ones);
 * - at the end of the turn before the newest one, which is exactly where the previous request
 *   wrote its cache: however many messages or tool calls came since, this is an exact hit, and
 *   a long tool loop or a busy channel never falls outside the lookback;
 * - at the end of the newest turn, so the next request reads everything up to here.
 * Returns the kinds placed.
 */
export function placeCacheBreakpoints(params: MessageCreateParamsNonStreaming, placement: CachePlacement): BreakpointKind[] {
  const control = placement.lifetime === '1h' ? { type: 'ephemeral' as const, ttl: '1h' as const } : { type: 'ephemeral' as const };
  const candidates: Candidate[] = [];
  let tokens = 0;

  const tools = params.tools ?? [];
  tokens += tools.length === 0 ? 0 : estimate(tools);
  const lastTool = tools.at(-1) as Tool | undefined;
  const segments = typeof params.system === 'string' ? splitSystem(params.system, placement.systemBreaks) : [];
  const systemBlocks: TextBlockParam[] = segments.map((text) => ({ type: 'text', text }));
  const markSystem = (block: TextBlockParam) => (): boolean => {
    block.cache_control = control;
    params.system = systemBlocks;
    return true;
  };
  if (systemBlocks.length > 0) {
    tokens += estimate(systemBlocks[0]!.text);
    candidates.push({ kind: 'tools_and_system', prefixTokens: tokens, mark: markSystem(systemBlocks[0]!) });
    for (const block of systemBlocks.slice(1)) tokens += estimate(block.text);
    if (systemBlocks.length > 1) {
      candidates.push({ kind: 'summaries', prefixTokens: tokens, mark: markSystem(systemBlocks.at(-1)!) });
    }
  } else if (lastTool) {
    candidates.push({ kind: 'tools_and_system', prefixTokens: tokens, mark: () => ((lastTool.cache_control = control), true) });
  }

  const messages = params.messages;
  const ends: number[] = [];
  for (const message of messages) {
    tokens += typeof message.content === 'string' ? estimate(message.content) : message.content.reduce((sum, block) => sum + blockTokens(block), 0);
    ends.push(tokens);
  }
  const lastAssistant = messages.findLastIndex((message) => message.role === 'assistant');
  const previous = lastAssistant - 1;
  if (previous >= 0 && previous < messages.length - 1) {
    candidates.push({ kind: 'previous_turn', prefixTokens: ends[previous]!, mark: () => markLastBlock(messages[previous]!, control) });
  }
  if (messages.length > 0) {
    candidates.push({ kind: 'turn', prefixTokens: ends.at(-1)!, mark: () => markLastBlock(messages.at(-1)!, control) });
  }

  const placed: BreakpointKind[] = [];
  let lastPrefix = -1;
  for (const candidate of candidates) {
    // Below the minimum the model caches nothing; two marks on one prefix are one wasted slot.
    if (candidate.prefixTokens < placement.minTokens || candidate.prefixTokens === lastPrefix) continue;
    if (placed.length >= MAX_BREAKPOINTS) break;
    if (!candidate.mark()) continue;
    placed.push(candidate.kind);
    lastPrefix = candidate.prefixTokens;
  }
  return placed;
}

/**
 * The system prompt cut at its valid break offsets. The pieces join to exactly the prompt: a
 * blank piece (the API refuses blank text blocks) joins its neighbour instead of being dropped.
 */
function splitSystem(system: string, breaks: readonly number[] = []): string[] {
  if (system.trim() === '') return [];
  const pieces: string[] = [];
  let start = 0;
  for (const at of breaks) {
    if (!Number.isInteger(at) || at <= start || at >= system.length) continue;
    pieces.push(system.slice(start, at));
    start = at;
  }
  pieces.push(system.slice(start));
  const joined: string[] = [];
  let carried = '';
  for (const piece of pieces) {
    if (piece.trim() === '') {
      if (joined.length > 0) joined[joined.length - 1] += piece;
      else carried += piece;
      continue;
    }
    joined.push(carried + piece);
    carried = '';
  }
  return joined;
}

/** Marks a message's last block (a string content becomes one text block). False when it has none. */
function markLastBlock(message: MessageParam, control: { type: 'ephemeral'; ttl?: '1h' }): boolean {
  if (typeof message.content === 'string') {
    if (message.content.trim() === '') return false;
    message.content = [{ type: 'text', text: message.content, cache_control: control }];
    return true;
  }
  const last = message.content.at(-1) as (ContentBlockParam & { cache_control?: unknown }) | undefined;
  if (!last) return false;
  last.cache_control = control;
  return true;
}

function blockTokens(block: ContentBlockParam): number {
  return block.type === 'image' ? IMAGE_TOKENS : estimate(block);
}

/** Four characters a token, as the channel estimates: only compared with the minimum. */
function estimate(value: unknown): number {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return Math.ceil(text.length / 4);
}
