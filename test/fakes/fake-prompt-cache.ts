/**
 * The prompt cache of the Messages API, as the fake server keeps it: what a request with
 * `cache_control` breakpoints would read from the cache, write to it, and pay in full.
 *
 * The model it follows (Anthropic's documented behaviour):
 * - A request is one sequence of blocks in prefix order: tools, then system blocks, then every
 *   message's content blocks. A breakpoint is a block carrying `cache_control`; a request may
 *   carry at most 4.
 * - A breakpoint looks up the prefix that ends at its block, then at each of the 20 blocks
 *   before it, and reads the longest prefix found. A prefix is cached only at a breakpoint,
 *   and only when it holds at least the model's minimum cacheable length.
 * - Everything from the end of what was read up to the last breakpoint that could be cached
 *   is written (billed 1.25× with the 5-minute lifetime, 2× with `ttl: "1h"`); what was read
 *   is billed 0.1×; the rest (after the last breakpoint) is plain input.
 * - An entry lives for its lifetime from its last use (a read refreshes it); time is the
 *   caller's clock, so tests and replays run on virtual time.
 * - `tool_choice` is part of the messages' prefix: changing it misses every message block.
 *
 * Usage is reported as the API does: `input_tokens` is only the uncached part, and
 * `cache_creation_input_tokens` + `cache_read_input_tokens` are the rest of the request.
 */
import { createHash } from 'node:crypto';

export type CacheTtl = '5m' | '1h';

const TTL_MS: Record<CacheTtl, number> = { '5m': 5 * 60_000, '1h': 60 * 60_000 };

/** The lookback of the real API: a breakpoint finds a cached prefix at most this many blocks back. */
export const LOOKBACK_BLOCKS = 20;
/** The most `cache_control` blocks one request may carry. */
export const MAX_BREAKPOINTS = 4;

/** Minimum cacheable prompt length by model (Anthropic's documentation); others get 1,024. */
export function minimumCacheableTokens(model: string): number {
  if (/opus-4-[56]|haiku-4-5/.test(model)) return 4096;
  if (/sonnet-4-6/.test(model)) return 2048;
  return 1024;
}

export interface FakePromptCacheOptions {
  /** The clock entries age by (ms); default `Date.now`. */
  now?: () => number;
  /** Minimum cacheable length for a model; default `minimumCacheableTokens`. */
  minimumTokens?: (model: string) => number;
  /**
   * Tokens of one block. Default: a token per 4 characters of what the block says (its text, a
   * tool call's name and input, a result's content, a tool's JSON), counted over the running
   * prefix, so that a system prompt sent whole or cut into blocks counts the same.
   */
  blockTokens?: (block: unknown) => number;
}

/** The usage fields of a response, as the Messages API sends them. */
export interface CachedUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  cache_creation: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
}

/** Totals over every request accounted, for tests and benchmarks. */
export interface PromptCacheTotals {
  requests: number;
  uncached: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
  cacheRead: number;
}

interface FlatBlock {
  /** Tokens with `blockTokens`, else characters (turned into tokens over the running prefix). */
  tokens: number;
  /** Hash of the prefix that ends with this block. */
  prefix: string;
  ttl?: CacheTtl;
}

interface Entry {
  expiresAt: number;
  ttlMs: number;
}

export class FakePromptCache {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly minimumTokens: (model: string) => number;
  private readonly blockTokens: ((block: unknown) => number) | undefined;
  readonly totals: PromptCacheTotals = { requests: 0, uncached: 0, cacheWrite5m: 0, cacheWrite1h: 0, cacheRead: 0 };
  /** The usage of every request accounted, in order. */
  readonly log: CachedUsage[] = [];

  constructor(options: FakePromptCacheOptions = {}) {
    this.now = options.now ?? Date.now;
    this.minimumTokens = options.minimumTokens ?? minimumCacheableTokens;
    this.blockTokens = options.blockTokens;
  }

  /** Why the API would refuse the request's breakpoints (400), or undefined when they are fine. */
  problem(body: any): string | undefined {
    const marks = collectBlocks(body).filter((block) => block.cache_control !== undefined);
    if (marks.length > MAX_BREAKPOINTS) {
      return `A maximum of ${MAX_BREAKPOINTS} blocks with cache_control may be provided. Found ${marks.length}.`;
    }
    let longest = Infinity;
    for (const { cache_control: control } of marks) {
      if (control?.type !== 'ephemeral') return 'cache_control.type: Input should be \'ephemeral\'';
      const ttl = control.ttl ?? '5m';
      if (ttl !== '5m' && ttl !== '1h') return `cache_control.ttl: Input should be '5m' or '1h'`;
      // The API wants longer lifetimes before shorter ones.
      if (TTL_MS[ttl as CacheTtl] > longest) return 'a ttl=\'1h\' cache_control block must not come after a ttl=\'5m\' one';
      longest = TTL_MS[ttl as CacheTtl];
    }
    return undefined;
  }

  /**
   * Reads and writes the cache for one request and says how its `totalTokens` split (default:
   * the sum of its blocks' tokens). The split is bounded by the total, whatever the blocks say.
   */
  account(body: any, totalTokens?: number): CachedUsage {
    const now = this.now();
    const blocks = this.flatten(body);
    const prefixTokens: number[] = [];
    let running = 0;
    for (const block of blocks) {
      running += block.tokens;
      prefixTokens.push(this.blockTokens ? running : Math.ceil(running / 4));
    }
    if (!this.blockTokens) running = Math.ceil(running / 4);
    const total = totalTokens ?? running;
    const minimum = this.minimumTokens(typeof body?.model === 'string' ? body.model : '');
    const breakpoints = blocks.flatMap((block, index) => (block.ttl ? [index] : []));

    let readEnd = -1;
    for (const at of breakpoints) {
      for (let index = at; index >= Math.max(0, at - LOOKBACK_BLOCKS); index -= 1) {
        const entry = this.live(blocks[index]!.prefix, now);
        if (!entry) continue;
        entry.expiresAt = now + entry.ttlMs;
        readEnd = Math.max(readEnd, index);
        break;
      }
    }
    const readTokens = readEnd < 0 ? 0 : prefixTokens[readEnd]!;
    const written: Record<CacheTtl, number> = { '5m': 0, '1h': 0 };
    let writtenEnd = readTokens;
    for (const at of breakpoints) {
      const ttl = blocks[at]!.ttl!;
      if (prefixTokens[at]! < minimum) continue;
      const existing = this.live(blocks[at]!.prefix, now);
      const ttlMs = Math.max(TTL_MS[ttl], existing?.ttlMs ?? 0);
      this.entries.set(blocks[at]!.prefix, { expiresAt: now + ttlMs, ttlMs });
      if (at <= readEnd) continue;
      written[ttl] += prefixTokens[at]! - writtenEnd;
      writtenEnd = prefixTokens[at]!;
    }

    const cacheRead = Math.min(readTokens, total);
    const write1h = Math.min(written['1h'], total - cacheRead);
    const write5m = Math.min(written['5m'], total - cacheRead - write1h);
    const uncached = total - cacheRead - write1h - write5m;
    this.totals.requests += 1;
    this.totals.uncached += uncached;
    this.totals.cacheWrite5m += write5m;
    this.totals.cacheWrite1h += write1h;
    this.totals.cacheRead += cacheRead;
    const usage = {
      input_tokens: uncached,
      cache_creation_input_tokens: write5m + write1h,
      cache_read_input_tokens: cacheRead,
      cache_creation: { ephemeral_5m_input_tokens: write5m, ephemeral_1h_input_tokens: write1h },
    };
    this.log.push(usage);
    return usage;
  }

  /** Entries not yet expired (expired ones are dropped on the way). */
  get size(): number {
    const now = this.now();
    for (const [key, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(key);
    return this.entries.size;
  }

  /** Forgets every entry and the totals. */
  clear(): void {
    this.entries.clear();
    this.log.length = 0;
    Object.assign(this.totals, { requests: 0, uncached: 0, cacheWrite5m: 0, cacheWrite1h: 0, cacheRead: 0 });
  }

  private live(prefix: string, now: number): Entry | undefined {
    const entry = this.entries.get(prefix);
    if (entry && entry.expiresAt <= now) {
      this.entries.delete(prefix);
      return undefined;
    }
    return entry;
  }

  /** Each block with its tokens and the hash of the prefix it closes (cache_control left out). */
  private flatten(body: any): FlatBlock[] {
    let hash = createHash('sha256').update(`model:${String(body?.model ?? '')}`).digest('hex');
    const flat: FlatBlock[] = [];
    const push = (key: unknown, block: any): void => {
      const bare = withoutCacheControl(block);
      hash = createHash('sha256').update(hash).update(JSON.stringify(key)).update(JSON.stringify(bare)).digest('hex');
      const control = block?.cache_control;
      const tokens = this.blockTokens ? this.blockTokens(bare) : blockCharacters(bare);
      flat.push({ tokens, prefix: hash, ...(control ? { ttl: (control.ttl ?? '5m') as CacheTtl } : {}) });
    };
    for (const tool of Array.isArray(body?.tools) ? body.tools : []) push('tool', tool);
    if (typeof body?.system === 'string') push('system', { type: 'text', text: body.system });
    else for (const block of Array.isArray(body?.system) ? body.system : []) push('system', block);
    const choice = JSON.stringify(body?.tool_choice ?? null);
    for (const message of Array.isArray(body?.messages) ? body.messages : []) {
      const content = typeof message?.content === 'string' ? [{ type: 'text', text: message.content }] : Array.isArray(message?.content) ? message.content : [];
      for (const block of content) push(`${String(message?.role)}|${choice}`, block);
    }
    return flat;
  }
}

/** What a block says, in characters: the same whether a text is sent whole or in pieces. */
function blockCharacters(block: any): number {
  if (block?.type === 'text') return String(block.text ?? '').length;
  if (block?.type === 'tool_use') return String(block.name ?? '').length + JSON.stringify(block.input ?? {}).length;
  if (block?.type === 'tool_result') return typeof block.content === 'string' ? block.content.length : JSON.stringify(block.content ?? '').length;
  if (block?.type === 'image') return 6_400;
  return JSON.stringify(block ?? '').length;
}

/** Every block that may carry `cache_control`, in prefix order. */
function collectBlocks(body: any): any[] {
  const blocks: any[] = [];
  if (Array.isArray(body?.tools)) blocks.push(...body.tools);
  if (Array.isArray(body?.system)) blocks.push(...body.system);
  for (const message of Array.isArray(body?.messages) ? body.messages : []) {
    if (Array.isArray(message?.content)) blocks.push(...message.content);
  }
  return blocks.filter((block) => block !== null && typeof block === 'object');
}

function withoutCacheControl(block: any): unknown {
  if (block === null || typeof block !== 'object' || !('cache_control' in block)) return block;
  const { cache_control: _ignored, ...rest } = block;
  return rest;
}

/** A request's system prompt as one text, whether it was sent as a string or as blocks. */
export function systemText(body: any): string {
  if (typeof body?.system === 'string') return body.system;
  return Array.isArray(body?.system) ? body.system.map((block: any) => String(block?.text ?? '')).join('') : '';
}

/** Where a request's breakpoints are, as `where:index` (tools, system, or message:block). */
export function breakpointsOf(body: any): string[] {
  const found: string[] = [];
  (Array.isArray(body?.tools) ? body.tools : []).forEach((tool: any, index: number) => tool?.cache_control && found.push(`tool:${index}`));
  (Array.isArray(body?.system) ? body.system : []).forEach((block: any, index: number) => block?.cache_control && found.push(`system:${index}`));
  (Array.isArray(body?.messages) ? body.messages : []).forEach((message: any, at: number) => {
    if (Array.isArray(message?.content)) message.content.forEach((block: any, index: number) => block?.cache_control && found.push(`message:${at}:${index}`));
  });
  return found;
}
