/**
 * Removing a message's words from the tool traffic kept in history. Tool results (a
 * `memory_search` answer, a worker's `channel_history`) quote archived messages verbatim; once
 * a message is deleted or edited those quotes are the last copies the model could still read.
 * Blocks keep their shape (type, ids, JSON structure), so a tool call stays paired with its
 * result and the request stays valid for the API; only quoted text becomes a short note.
 */

import { quoteIndex, redactQuotes, type QuoteIndex } from './quoted-spans.js';

export const DELETED_NOTE = '[deleted message]';
export const EDITED_NOTE = '[edited message: earlier text removed]';

/** Below this length a text is only removed where it stands alone on a line: "ok" is everywhere. */
const MIN_SUBSTRING_LENGTH = 12;

/** What to take out of tool blocks. */
export interface RedactionTarget {
  /** Objects carrying one of these in `message_id` lose their quoted text. */
  messageIds: ReadonlySet<string>;
  /** Verbatim texts to replace wherever they occur (message text, `author: text`, memories). */
  texts: readonly string[];
  /** The same texts, for quotes that differ in whitespace or case, or quote only part. */
  quotes: QuoteIndex;
  note: string;
}

/** Longest first, so `Alice: hello there` goes before `hello there` leaves `Alice: [..]`. */
export function redactionTarget(options: { messageIds: Iterable<string>; texts: Iterable<string>; note: string }): RedactionTarget {
  const texts = [...new Set([...options.texts].map((text) => text.trim()).filter((text) => text.length > 0))];
  texts.sort((left, right) => right.length - left.length);
  return { messageIds: new Set(options.messageIds), texts, quotes: quoteIndex(texts), note: options.note };
}

/**
 * A tool block as stored in history (its JSON), with the target's text replaced. Returns
 * undefined when nothing changed (the common case: the block never quoted the message).
 */
export function redactToolBlock(json: string, target: RedactionTarget): string | undefined {
  let block: unknown;
  try {
    block = JSON.parse(json);
  } catch {
    const replaced = replaceTexts(json, target);
    return replaced === json ? undefined : replaced;
  }
  if (typeof block !== 'object' || block === null) return undefined;
  const record = block as Record<string, unknown>;
  let changed = false;
  if (record.type === 'tool_result') {
    const content = record.content;
    if (typeof content === 'string') {
      const next = redactResultText(content, target);
      if (next !== content) {
        record.content = next;
        changed = true;
      }
    } else if (Array.isArray(content)) {
      const next = walk(content, target);
      if (next.changed) {
        record.content = next.value;
        changed = true;
      }
    }
  } else if (record.type === 'tool_use') {
    const next = walk(record.input, target);
    if (next.changed) {
      record.input = next.value;
      changed = true;
    }
  } else {
    const next = walk(record, target);
    return next.changed ? JSON.stringify(next.value) : undefined;
  }
  return changed ? JSON.stringify(record) : undefined;
}

/** A tool result's text is usually JSON itself (the tools answer with JSON): redact inside it. */
function redactResultText(text: string, target: RedactionTarget): string {
  const trimmed = text.trim();
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      const next = walk(parsed, target);
      return next.changed ? JSON.stringify(next.value) : text;
    } catch {
      // Not JSON after all: plain text below.
    }
  }
  return replaceTexts(text, target);
}

function walk(value: unknown, target: RedactionTarget): { value: unknown; changed: boolean } {
  if (typeof value === 'string') {
    const next = replaceTexts(value, target);
    return { value: next, changed: next !== value };
  }
  if (Array.isArray(value)) {
    let changed = false;
    const next = value.map((item) => {
      const result = walk(item, target);
      changed ||= result.changed;
      return result.value;
    });
    return { value: next, changed };
  }
  if (typeof value !== 'object' || value === null) return { value, changed: false };
  const record = value as Record<string, unknown>;
  const quotesDeleted = typeof record.message_id === 'string' && target.messageIds.has(record.message_id);
  let changed = false;
  const next: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(record)) {
    if (quotesDeleted && (key === 'content' || key === 'text') && typeof item === 'string') {
      next[key] = target.note;
      changed ||= item !== target.note;
      continue;
    }
    const result = walk(item, target);
    next[key] = result.value;
    changed ||= result.changed;
  }
  return { value: next, changed };
}

/**
 * Every occurrence of every target text becomes the note, and so does every looser quote of
 * one (at least `MIN_QUOTE_LENGTH` characters in common, whitespace and case aside).
 */
export function replaceTexts(text: string, target: RedactionTarget): string {
  return redactQuotes(replaceExact(text, target), target.quotes, target.note);
}

function replaceExact(text: string, target: RedactionTarget): string {
  let result = text;
  for (const quoted of target.texts) {
    if (quoted.length >= MIN_SUBSTRING_LENGTH) {
      if (result.includes(quoted)) result = result.split(quoted).join(target.note);
    } else if (result.includes(quoted)) {
      result = result
        .split('\n')
        .map((line) => (line.trim() === quoted ? target.note : line))
        .join('\n');
    }
  }
  return result;
}
