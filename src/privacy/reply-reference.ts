import { estimateEntryTokens } from '../context/token-estimate.js';
import type { HistoryEntry } from '../context/types.js';

/**
 * A reply names the message it answers by id instead of copying its words, so that a delete
 * or an edit of that message leaves no stale copy in history, the archive or the index. The
 * quote is resolved each time a request is built, from what history holds then.
 */

/** How much of the answered message the model sees. */
export const QUOTE_LIMIT = 120;

const REFERENCE = /^\(replying to (.*?) \[msg ([^\]\s]+)\]\)/;

/** The stored form: `(replying to Alice [msg 123])`. */
export function replyReference(who: string, messageId: string): string {
  return `(replying to ${who} [msg ${messageId}])`;
}

/**
 * Entries with their reply references resolved: `(replying to Alice: "the quoted text")`, or
 * a note that the message is no longer there. Entries without one are returned as they are.
 */
export function resolveReplyReferences(
  entries: readonly HistoryEntry[],
  lookup: (messageId: string) => { authorName: string; content: string } | undefined,
): readonly HistoryEntry[] {
  let resolved: HistoryEntry[] | undefined;
  entries.forEach((entry, index) => {
    if (entry.kind !== 'message' || !entry.content.startsWith('(replying to ')) return;
    const match = REFERENCE.exec(entry.content);
    if (!match) return;
    const answered = lookup(match[2]!);
    const text = resolvedReference(answered?.authorName ?? match[1]!, answered);
    resolved ??= [...entries];
    const content = text + entry.content.slice(match[0].length);
    // The quote's length is the estimate's allowance, not a reason to cut the message as oversized.
    const extra = Math.max(0, estimateEntryTokens({ ...entry, content }) - estimateEntryTokens(entry));
    resolved[index] = { ...entry, content, tokens: entry.tokens + extra };
  });
  return resolved ?? entries;
}

/** How a resolved reference shows the message it names (`answered`, undefined when it is gone). */
export function resolvedReference(who: string, answered: { content: string } | undefined): string {
  return answered
    ? `(replying to ${who}: "${clip(stripReference(answered.content).replace(/\s+/g, ' '), QUOTE_LIMIT)}")`
    : `(replying to ${who}: a message that is no longer available)`;
}

/** The stored reference a message's text opens with (`(replying to Alice [msg 123])`), or ''. */
export function leadingReference(content: string): string {
  return REFERENCE.exec(content)?.[0] ?? '';
}

/**
 * Whether two stored forms of a message say the same: a reply's reference counts by the id it
 * names, not by the author label it was stored with (which depends on what was cached).
 */
export function sameMessageText(left: string, right: string): boolean {
  return unlabelled(left) === unlabelled(right);
}

function unlabelled(content: string): string {
  const match = REFERENCE.exec(content);
  return match ? `[msg ${match[2]}]${content.slice(match[0].length)}` : content;
}

/** A reply to a reply quotes the words, not the nested reference. */
function stripReference(content: string): string {
  const match = REFERENCE.exec(content);
  return match ? content.slice(match[0].length).trim() : content;
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
