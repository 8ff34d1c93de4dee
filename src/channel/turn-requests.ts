import type { ContentBlock, ModelMessage, TextBlock } from '../llm/chat-model.js';
import { estimateEntryTokens } from '../context/token-estimate.js';
import type { HistoryEntry } from '../context/types.js';
import { redactToolBlock, replaceTexts, type RedactionTarget } from '../privacy/redact.js';
import { leadingReference, resolvedReference } from '../privacy/reply-reference.js';
import { buildSystemPrompt, systemBreaksOf, textBlock, type BlockSource, type SystemSource } from './model-request.js';
import type { SummaryEntry } from '../context/types.js';
import type { RemovedMessage } from './privacy-propagator.js';
import type { LateChange, TurnWatch } from './turn-watches.js';

/**
 * A turn's later requests follow the deletes and edits that reach its channel while it runs.
 * Its tool loop sends the messages built for its first request again and again, with what it
 * added; before each request they are brought up to date with every change the turn's watch
 * has seen, the way the channel's next request will read:
 *
 * - a deleted message's entry becomes the note that stands for it (`[deleted message]`, its
 *   files and reply context gone), an edited one reads its new text;
 * - a reply to the message quotes it as it reads now (or says it is no longer available);
 * - the model's own words (replies, and words written before a tool call) lose their quotes of
 *   it, as a stored reply does (`TurnWatch.redact`);
 * - tool calls and results, and what came back from the archive with a message, lose its text
 *   as the tool rows in history do. Blocks keep their ids, so each call stays paired.
 *
 * `sources` says which entry each block of the first request stands for (`buildMessages`).
 * Returns the hook the tool loop calls before each request (`ToolLoopOptions.beforeRequest`).
 */
export function followChanges(
  watch: Pick<TurnWatch, 'changes' | 'redact'>,
  sources: ReadonlyMap<ContentBlock, BlockSource>,
): (messages: readonly ModelMessage[]) => ModelMessage[] | undefined {
  // Replacement blocks stand for the same entries (a message edited twice is found again).
  const known = new Map(sources);
  // Per message: the target each change was applied with, by the change's index. A change's
  // target grows once its propagation has run (the words of memories drawn from the message),
  // and its text redaction is then applied again; the entries are replaced once.
  const applied = new WeakMap<ModelMessage, readonly RedactionTarget[]>();
  return (messages) => {
    const changes = watch.changes();
    if (changes.length === 0) return undefined;
    let changed = false;
    const updated = messages.map((message) => {
      const done = applied.get(message) ?? [];
      if (done.length === changes.length && changes.every((change, index) => done[index] === change.target)) return message;
      const next = followMessage(message, changes, done, known, watch);
      applied.set(next, changes.map((change) => change.target));
      changed ||= next !== message;
      return next;
    });
    return changed ? updated : undefined;
  };
}

/**
 * Shown, until the change's propagation has run, in place of a summary of the turn's system
 * prompt that covered a message deleted or edited meanwhile: the summary may quote it.
 */
export const WITHHELD_SUMMARY = 'Not shown: this part held a message that was deleted or edited since; memory_search finds what remains.';

/**
 * The system prompt's summaries follow the same changes (see `followChanges`): one covering a
 * deleted or edited message is withheld at once, then shown as the change's propagation left
 * it (a marker, a rewrite, or nothing once retired), as the channel's next request will show
 * it. Summaries the turn did not start with (a compaction landed meanwhile) are not added: the
 * messages they stand for are still in the turn's requests. Returns the hook the tool loop
 * calls before each request (`ToolLoopOptions.beforeSystem`).
 */
export function followSummaries(
  watch: Pick<TurnWatch, 'changes'>,
  source: SystemSource,
): () => { system: string; systemBreaks: readonly number[] } | undefined {
  let shown: readonly SummaryEntry[] | undefined;
  return () => {
    const changes = watch.changes();
    if (changes.length === 0 || source.summaries.length === 0) return undefined;
    const now = source.summaries.flatMap((summary) => {
      let current: SummaryEntry | undefined = summary;
      for (const change of changes) {
        if (!current) break;
        const covers = change.removed.some((message) => message.seq >= current!.fromSeq && message.seq <= current!.toSeq);
        if (!covers) continue;
        if (change.summaries === undefined) {
          current = { ...current, kind: 'marker', content: WITHHELD_SUMMARY };
          continue;
        }
        const after = change.summaries.find((changed) => changed.id === summary.id);
        if (!after) continue; // The propagation found nothing in it to take out.
        const { live, ...entry } = after;
        current = live ? entry : undefined;
      }
      return current ? [current] : [];
    });
    const previous = shown ?? source.summaries;
    if (now.length === previous.length && now.every((summary, index) => sameSummary(summary, previous[index]!))) return undefined;
    shown = now;
    return { system: buildSystemPrompt(source.systemPrompt, now), systemBreaks: systemBreaksOf(source.systemPrompt, now) };
  };
}

function sameSummary(a: SummaryEntry, b: SummaryEntry): boolean {
  return a.id === b.id && a.kind === b.kind && a.content === b.content && a.fromSeq === b.fromSeq && a.toSeq === b.toSeq;
}

function followMessage(
  message: ModelMessage,
  changes: readonly LateChange[],
  done: readonly RedactionTarget[],
  known: Map<ContentBlock, BlockSource>,
  watch: Pick<TurnWatch, 'redact'>,
): ModelMessage {
  if (typeof message.content === 'string') {
    if (message.role !== 'assistant') return message;
    const text = watch.redact(message.content);
    return text === message.content ? message : { ...message, content: text };
  }
  let blocks: ContentBlock[] = message.content;
  changes.forEach((change, index) => {
    // Entries change once per change; text redaction again whenever the change's target grew.
    if (index >= done.length) blocks = followEntries(blocks, change, known);
    if (done[index] !== change.target) blocks = blocks.map((block) => redactBlock(block, message.role, change.target, known));
  });
  if (message.role === 'assistant') {
    blocks = blocks.map((block) => {
      if (block.type !== 'text') return block;
      const text = watch.redact(block.text);
      return text === block.text ? block : replaced(block, { ...block, text }, known);
    });
  }
  const same = blocks.length === message.content.length && blocks.every((block, index) => block === (message.content as ContentBlock[])[index]);
  return same ? message : { ...message, content: blocks };
}

/** A deleted message's blocks become one note; an edited one's text, its new text; replies quote it anew. */
function followEntries(blocks: readonly ContentBlock[], change: LateChange, known: Map<ContentBlock, BlockSource>): ContentBlock[] {
  const removed = new Map(change.removed.filter((message) => message.seq >= 0).map((message) => [message.seq, message]));
  const edited = new Map(change.edited.map((entry) => [entry.seq, entry]));
  const result: ContentBlock[] = [];
  for (const block of blocks) {
    const source = known.get(block);
    const gone = source ? removed.get(source.entry.seq) : undefined;
    if (!source || !gone || source.entry.kind !== 'message') {
      result.push(source?.own && block.type === 'text' ? requoted(block, source, change, known) : block);
      continue;
    }
    if (!source.own) {
      // Its reply context and files go with a deleted message; an edit leaves them.
      if (change.mode === 'edit') result.push(block);
      continue;
    }
    const now = change.mode === 'edit' ? edited.get(gone.seq) : undefined;
    const entry = now ? shownEdit(source.entry, gone, now) : { ...source.entry, content: change.target.note };
    result.push(replaced(block, textBlock(entry), known, entry));
  }
  return result;
}

/** A message replying to a changed one quotes it as it reads now (see `resolveReplyReferences`). */
function requoted(block: TextBlock, source: BlockSource, change: LateChange, known: Map<ContentBlock, BlockSource>): TextBlock {
  if (source.entry.kind !== 'message' || source.entry.role !== 'user') return block;
  let text = block.text;
  let content = source.entry.content;
  for (const message of change.removed) {
    if (message.seq < 0) continue;
    const before = resolvedReference(message.authorName, message);
    if (!text.includes(before)) continue;
    const now = change.edited.find((entry) => entry.seq === message.seq);
    const after = resolvedReference(now?.authorName ?? message.authorName, change.mode === 'edit' ? now : undefined);
    text = text.replace(before, after);
    content = content.replace(before, after);
  }
  return text === block.text ? block : replaced(block, { ...block, text }, known, { ...source.entry, content });
}

/**
 * An edited message as the request shows it: its new text, after the reply context its old text
 * was shown with (the message it replies to does not change with an edit).
 */
function shownEdit(shown: HistoryEntry, before: RemovedMessage, edited: HistoryEntry): HistoryEntry {
  const reference = leadingReference(edited.content);
  const oldRest = before.content.slice(leadingReference(before.content).length);
  const content =
    reference !== '' && shown.content.endsWith(oldRest)
      ? shown.content.slice(0, shown.content.length - oldRest.length) + edited.content.slice(reference.length)
      : edited.content;
  // As resolved references do: the quote's length adds to the estimate, it does not make the message oversized.
  const extra = Math.max(0, estimateEntryTokens({ ...edited, content }) - estimateEntryTokens(edited));
  return { ...edited, content, tokens: edited.tokens + extra };
}

/**
 * What the history's tool rows lose (`redactToolBlock`): tool calls' input and results, and text
 * a request adds that no person wrote there (reply context and files from the archive, notes).
 * A person's own message and the model's words are left to `followEntries` and `TurnWatch.redact`.
 */
function redactBlock(block: ContentBlock, role: ModelMessage['role'], target: RedactionTarget, known: Map<ContentBlock, BlockSource>): ContentBlock {
  if (block.type === 'tool_use' || block.type === 'tool_result') {
    const json = redactToolBlock(JSON.stringify(block), target);
    return json === undefined ? block : replaced(block, JSON.parse(json) as ContentBlock, known);
  }
  if (block.type !== 'text' || role !== 'user' || known.get(block)?.own) return block;
  const text = replaceTexts(block.text, target);
  return text === block.text ? block : replaced(block, { ...block, text }, known);
}

/** `next` takes `block`'s place, standing for the same entry (as it reads now, when given). */
function replaced<T extends ContentBlock>(block: ContentBlock, next: T, known: Map<ContentBlock, BlockSource>, entry?: HistoryEntry): T {
  const source = known.get(block);
  if (source) known.set(next, entry ? { ...source, entry } : source);
  return next;
}

