import type { HistoryEntry, SummaryEntry } from '../context/types.js';
import { CALIBRATION } from '../context/calibration.js';
import { estimateTokens } from '../context/token-estimate.js';
import { TOOL_USE_SYSTEM_TOKENS } from '../context/request-room.js';
import { formatTimestamp, renderSummaries, renderTranscript } from './render-transcript.js';

/**
 * The compaction worker's instructions. The summary it writes replaces the oldest part of a
 * channel's live context, so anything it leaves out is only reachable through memory search:
 * hence the insistence on exact names, numbers and identifiers, and on saving memories.
 */
export const SUMMARY_SYSTEM_PROMPT = `You keep the long-term record of a chat channel. The oldest stretch of the conversation is about to leave the assistant's working context, and the summary you write will stand in its place. Whatever you drop from it can later be found only through memory search, so write carefully.

You will receive the transcript to condense, one line per message: time (UTC), speaker, message id, text. You may also receive earlier summaries of the same channel.

Do two things.

1. Save what is worth remembering, with the memory_save tool, before you write the summary.
   - One memory per call: a single self-contained statement that makes sense without the transcript, naming who it is about (for example "Priya prefers meetings after 14:00 UTC", not "she prefers afternoons").
   - Save every lasting fact, decision, preference, identity detail (names, roles, pronouns, time zones, relationships), event with its date, goal and open todo or commitment (who promised what, by when).
   - Name in source_ids the message ids (the "msg" ids of the transcript) the memory is drawn from, and only those: when people delete a message, what was drawn from it alone is forgotten.
   - Set memory_type to one of: fact, preference, decision, identity, event, observation, goal, todo. Set importance between 0 and 1: about 0.9 for identity details and firm decisions, 0.6 to 0.7 for preferences, plans and todos, 0.3 to 0.4 for passing observations.
   - Skip greetings, small talk, jokes with no lasting point, and anything already saved. If a call returns an error, read it, fix the input and try again once.

2. Then answer with the summary itself, and nothing else.
   - One cohesive narrative in chronological order, in plain prose (short paragraphs; a list only for many parallel items).
   - Say who said or decided what, by name. Keep decisions, commitments, names, numbers, amounts, dates, times, links, code identifiers and message ids exactly as written.
   - Note questions left open and tasks still pending, with their owners.
   - If earlier summaries are given, fold them and the new transcript into one summary that covers the whole period, oldest first. Keep their key details; do not summarize them separately.
   - Be dense: cut filler, never facts. Stay well under the length limit.
   - Write only the summary: no preamble such as "Here is the summary", no closing remarks, no headings about what you did. Do not mention the tools or these instructions.`;

/** What a transcript line adds to its entry's estimate: time, message id, brackets. */
export const SUMMARY_LINE_TOKENS = 10;

/**
 * The summary request's own part, in real tokens with the calibration margin (its English
 * instructions count about as the estimate does): system prompt, the memory_save definition
 * (about 270 estimated tokens, 300 allowed), the words around the transcript (80), and the API's
 * tool-use prompt.
 */
export const SUMMARY_FIXED_TOKENS = Math.ceil((estimateTokens(SUMMARY_SYSTEM_PROMPT) + 300 + 80) * (1 + CALIBRATION.margin)) + TOOL_USE_SYSTEM_TOKENS;

/** Sent when the tool budget is spent and the model has not written its summary yet. */
export const FINAL_SUMMARY_REQUEST =
  'You have used all your memory_save calls. Do not call any tool now: answer with the summary only.';

export interface SummaryPromptInput {
  channelId: string;
  priorSummaries: readonly SummaryEntry[];
  entries: readonly HistoryEntry[];
}

/** The user turn the worker reads: earlier summaries (for a roll-up) and the transcript. */
export function buildSummaryRequestText(input: SummaryPromptInput): string {
  const parts: string[] = [];
  if (input.priorSummaries.length > 0) {
    parts.push(
      `Earlier summaries of channel ${input.channelId}, oldest first:`,
      '<earlier_summaries>',
      renderSummaries(input.priorSummaries),
      '</earlier_summaries>',
    );
  }
  if (input.entries.length > 0) {
    const first = input.entries[0]!;
    const last = input.entries[input.entries.length - 1]!;
    parts.push(
      `Transcript of channel ${input.channelId}, ${formatTimestamp(first.createdAt)} to ${formatTimestamp(last.createdAt)} UTC (${input.entries.length} entries):`,
      '<transcript>',
      renderTranscript(input.entries),
      '</transcript>',
    );
  }
  const task =
    input.priorSummaries.length > 0
      ? 'Save the memories worth keeping that are not saved yet, then write one summary covering everything above.'
      : 'Save the memories worth keeping, then write the summary.';
  parts.push(task);
  return parts.join('\n');
}
