import { InputError } from '../common/errors.js';
import { withoutNul } from '../common/outside-text.js';
import { MEMORY_TYPES, type MemoryType } from './types.js';

/** Longest memory a save accepts; longer text belongs in the transcript, not a memory. */
export const MAX_MEMORY_LENGTH = 4000;
/** Longest search query; longer text is refused rather than silently cut. */
export const MAX_QUERY_LENGTH = 2000;
export const MAX_SEARCH_LIMIT = 20;
export const DEFAULT_SEARCH_LIMIT = 5;

/** Importance given when the caller gives none: identity and preferences outlive observations. */
export const DEFAULT_IMPORTANCE: Readonly<Record<MemoryType, number>> = Object.freeze({
  identity: 0.8,
  preference: 0.7,
  decision: 0.7,
  goal: 0.7,
  fact: 0.6,
  todo: 0.6,
  event: 0.5,
  observation: 0.4,
});

export function isMemoryType(value: unknown): value is MemoryType {
  return typeof value === 'string' && (MEMORY_TYPES as readonly string[]).includes(value);
}

/** A memory's text (a model's `memory_save`, a summary's memories), U+0000 replaced as everywhere. */
export function checkContent(content: unknown, field = 'content'): string {
  if (typeof content !== 'string') throw new InputError(`${field} must be a string`);
  const trimmed = withoutNul(content).trim();
  if (trimmed.length === 0) throw new InputError(`${field} must not be empty`);
  const length = characterCount(trimmed, MAX_MEMORY_LENGTH);
  if (length > MAX_MEMORY_LENGTH) {
    throw new InputError(`${field} is ${length} characters long; the limit is ${MAX_MEMORY_LENGTH}`);
  }
  return trimmed;
}

export function checkMemoryType(value: unknown, field = 'memory_type'): MemoryType {
  if (!isMemoryType(value)) {
    throw new InputError(`${field} must be one of ${MEMORY_TYPES.join(', ')}; got ${JSON.stringify(value)}`);
  }
  return value;
}

export function checkImportance(value: unknown, field = 'importance'): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > 1) {
    throw new InputError(`${field} must be a number from 0 to 1; got ${JSON.stringify(value)}`);
  }
  return value;
}

export function checkLimit(value: unknown, field = 'limit'): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_SEARCH_LIMIT) {
    throw new InputError(`${field} must be an integer from 1 to ${MAX_SEARCH_LIMIT}; got ${JSON.stringify(value)}`);
  }
  return value;
}

/** A search query (a person's or a model's), U+0000 replaced: free text is never refused for it. */
export function checkQuery(value: unknown, field = 'query'): string {
  if (typeof value !== 'string') throw new InputError(`${field} must be a string`);
  const trimmed = withoutNul(value).trim();
  if (trimmed.length === 0) throw new InputError(`${field} must not be empty`);
  const length = characterCount(trimmed, MAX_QUERY_LENGTH);
  if (length > MAX_QUERY_LENGTH) {
    throw new InputError(`${field} is ${length} characters long; the limit is ${MAX_QUERY_LENGTH}`);
  }
  return trimmed;
}

/**
 * Characters as a person counts them (code points), as the docs and the tools' JSON Schema
 * `maxLength` count them: `text.length` counts UTF-16 units, two for an emoji, so 1,001 emoji
 * would read as 2,002 characters. Text of at most `limit` units has at most `limit` code points
 * and is not counted: its unit count is returned, which is all a comparison with `limit` needs.
 */
function characterCount(text: string, limit: number): number {
  if (text.length <= limit) return text.length;
  let count = 0;
  for (let index = 0; index < text.length; index = characterEnd(text, index)) count += 1;
  return count;
}

/** The first `limit` characters of `text` (code points, as the limits count): a pair is never split. */
export function firstCharacters(text: string, limit: number): string {
  if (text.length <= limit) return text;
  let count = 0;
  for (let index = 0; index < text.length; index = characterEnd(text, index)) {
    if (count === limit) return text.slice(0, index);
    count += 1;
  }
  return text;
}

/** Where the character starting at `index` ends: a high surrogate and the low one after it are one; a lone surrogate is one. */
function characterEnd(text: string, index: number): number {
  const unit = text.charCodeAt(index);
  if (unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length) {
    const next = text.charCodeAt(index + 1);
    if (next >= 0xdc00 && next <= 0xdfff) return index + 2;
  }
  return index + 1;
}
