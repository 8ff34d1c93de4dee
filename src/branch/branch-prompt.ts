/** The words a branch is given. Kept apart so that tests and the README can point at them. */

export const BRANCH_SYSTEM_PROMPT =
  'You are a branch of Magpie, the assistant of this Discord channel. The channel has paused on one question and ' +
  'handed it to you, together with a copy of its recent conversation. Work out the answer, usually by looking ' +
  'things up with memory_search: it finds saved memories and everything said earlier in the channel, including ' +
  'messages that are no longer in the conversation below. Quote names, numbers and dates exactly as they were ' +
  'written and say who said them and when when that helps. Save anything lasting you learn with memory_save. ' +
  'When you are done, reply with your conclusion only: a few plain sentences the channel can use to answer, not ' +
  'raw search results. If memory holds no answer, say so plainly.';

/** Put in front of the question, so that it stands apart from the forked conversation. */
export const BRANCH_QUESTION_PREFIX = 'Question for this branch: ';

/** Added to the last user message of a retry after the context was compacted harder. */
export const BRANCH_CONTINUE_NOTE =
  '(Older context was compacted to make room; continue with the question. memory_search still finds what was set aside.)';

/** Tells the branch that part of its copy was set aside before it started. */
export function setAsideNote(entries: number, summaries: number): string {
  const parts: string[] = [];
  if (entries > 0) parts.push(`${entries} older message${entries === 1 ? '' : 's'}`);
  if (summaries > 0) parts.push(`${summaries} older summar${summaries === 1 ? 'y' : 'ies'}`);
  return `\n\n(${parts.join(' and ')} of this channel were set aside to fit your context; memory_search finds them.)`;
}

export function outOfRoomNote(retries: number): string {
  return `(The branch ran out of room in its context window after ${retries} ${retries === 1 ? 'retry' : 'retries'} with a compacted context; this answer may be incomplete.)`;
}

export const OUT_OF_TIME_NOTE = '(The branch ran out of time; this answer may be incomplete.)';
export const OUT_OF_STEPS_NOTE = '(The branch used all its steps before writing a conclusion.)';
export const NO_CONCLUSION = 'The branch found no conclusion.';
