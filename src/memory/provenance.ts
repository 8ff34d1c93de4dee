import { InputError } from '../common/errors.js';
import type { ToolContext } from '../llm/tool.js';

/** Most source ids one memory may name. */
export const MAX_SOURCE_IDS = 50;

/** Words too common to tell one message from another. */
const COMMON = new Set(
  'the and for are was were that this with from have has had you your they them their she her his him not but what when where who will would could should about into there then than just also very'.split(' '),
);

/**
 * The message ids a memory records as its sources. Named ids are checked against what the work
 * was given (the worker's range, or the channel's live context and what its searches showed),
 * so a delete can tell which memories were drawn from a message alone. A worker that names
 * none gets the messages of its range that share the memory's distinctive words; a channel turn
 * that names none gets the messages it answers.
 */
export function resolveSources(value: unknown, content: string, context: ToolContext): string[] {
  if (value !== undefined) {
    if (!Array.isArray(value) || value.some((id) => typeof id !== 'string' || id.trim() === '')) {
      throw new InputError('source_ids must be an array of message id strings');
    }
    if (value.length > MAX_SOURCE_IDS) throw new InputError(`source_ids may name at most ${MAX_SOURCE_IDS} messages, got ${value.length}`);
    const ids = [...new Set((value as string[]).map((id) => normalizeId(id)))];
    const candidates = context.sourceCandidates ? new Set(context.sourceCandidates.map((candidate) => candidate.messageId)) : undefined;
    for (const id of ids) {
      // Only what the work was shown: a named id nobody can vouch for is refused, never kept.
      const known = candidates
        ? candidates.has(id)
        : context.seenSourceIds?.has(id) === true || context.isKnownSource?.(id) === true || context.sourceMessageIds?.includes(id) === true;
      if (!known) {
        throw new InputError(
          `source_ids: ${JSON.stringify(id)} is not a message of the conversation you were given; name only ids shown there`,
        );
      }
    }
    if (ids.length > 0) return ids;
  }
  if (context.sourceCandidates) return inferSources(content, context.sourceCandidates);
  if ((context.agent === 'branch' || context.agent === 'worker') && context.seenSources && context.seenSources.size > 0) {
    const seen = [...context.seenSources].map(([messageId, text]) => ({ messageId, content: text }));
    return inferSources(content, seen);
  }
  return context.sourceMessageIds ?? [];
}

/** Transcripts show ids as `msg 123`; the model may copy the prefix. */
function normalizeId(id: string): string {
  return id.trim().replace(/^msg[ -:]?(?=\S)/i, '');
}

/**
 * The candidates that share the most distinctive words with the memory. When nothing is shared
 * (a paraphrase), every candidate: a source too many only keeps the memory a little longer
 * after a delete, a source too few would let it outlive the message it came from.
 */
export function inferSources(content: string, candidates: ReadonlyArray<{ messageId: string; content: string }>): string[] {
  const wanted = words(content);
  const scored = candidates.map((candidate) => {
    const have = words(candidate.content);
    let shared = 0;
    for (const word of wanted) if (have.has(word)) shared += 1;
    return { id: candidate.messageId, shared };
  });
  const best = Math.max(0, ...scored.map((entry) => entry.shared));
  if (best === 0) return candidates.map((candidate) => candidate.messageId);
  return scored.filter((entry) => entry.shared >= Math.max(1, Math.ceil(best / 2))).map((entry) => entry.id);
}

function words(text: string): Set<string> {
  return new Set((text.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? []).filter((word) => !COMMON.has(word)));
}
