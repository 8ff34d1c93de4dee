import { CHARS_PER_TOKEN, estimateTokens } from '../context/token-estimate.js';
import { formatTimestamp } from './render-transcript.js';
import type { SummarizeRequest, SummarizeResult, Summarizer } from './summarizer.js';

/** Share of the input's tokens a summary may take, so that a compaction always frees room. */
export const EXTRACTIVE_RATIO = 0.25;
/** Floor of the budget, so a very small range still gets a readable line. */
const MIN_BUDGET_TOKENS = 48;

const STOP_WORDS = new Set(
  ('the a an and or but if then so of to in on at by for with from as is are was were be been being it its ' +
    'this that these those i you he she we they me him her us them my your his our their what which who whom ' +
    'do does did have has had not no yes just also very really too can could would should will shall may might ' +
    'must about into over than there here when where why how all any some more most such only own same ' +
    'oh ok okay yeah hey hi hello thanks thank lol im i\'m it\'s that\'s dont don\'t').split(' '),
);

interface Candidate {
  order: number;
  line: string;
  words: string[];
  numbers: number;
  names: number;
}

/**
 * The offline summarizer: deterministic, no network. It keeps the most informative sentences
 * (rare words, numbers, names; neither fragments nor walls of text) with their speakers and
 * times, in chronological order, within a token budget. Earlier summaries being rolled up are
 * treated the same way, line by line. Never empty for non-empty input.
 */
export function createExtractiveSummarizer(): Summarizer {
  return {
    name: 'extractive',
    async summarize(request: SummarizeRequest): Promise<SummarizeResult> {
      return { summary: extractiveSummary(request), memoriesSaved: 0 };
    },
  };
}

export function extractiveSummary(request: Pick<SummarizeRequest, 'entries' | 'priorSummaries' | 'settings' | 'maxSummaryTokens'>): string {
  const candidates = collectCandidates(request);
  if (candidates.length === 0) return '';
  let inputTokens = 0;
  for (const entry of request.entries) inputTokens += entry.tokens;
  for (const summary of request.priorSummaries) inputTokens += summary.tokens;
  // Bounded by construction: the text never costs more than the room the compaction has, so
  // that it always frees what it must (the floor only applies where there is room for it).
  const budget = Math.max(
    1,
    Math.min(
      request.settings.summaryMaxTokens,
      request.maxSummaryTokens ?? Infinity,
      Math.max(MIN_BUDGET_TOKENS, Math.ceil(inputTokens * EXTRACTIVE_RATIO)),
    ),
  );

  const scores = scoreCandidates(candidates);
  const ranked = candidates
    .map((candidate, index) => ({ candidate, score: scores[index]! }))
    .sort((left, right) => right.score - left.score || left.candidate.order - right.candidate.order);
  const chosen: Candidate[] = [];
  let used = 0;
  for (const { candidate } of ranked) {
    const cost = estimateTokens(candidate.line) + 1;
    if (used + cost > budget) continue;
    chosen.push(candidate);
    used += cost;
  }
  if (chosen.length === 0) {
    const best = ranked[0]!.candidate;
    // Cut to the budget exactly: `budget` tokens are `budget × 4` characters, the ellipsis included.
    return `${best.line.slice(0, budget * CHARS_PER_TOKEN - 1)}…`;
  }
  chosen.sort((left, right) => left.order - right.order);
  return chosen.map((candidate) => candidate.line).join('\n');
}

function collectCandidates(request: Pick<SummarizeRequest, 'entries' | 'priorSummaries'>): Candidate[] {
  const candidates: Candidate[] = [];
  const add = (line: string, text: string) => {
    const words = (text.toLowerCase().match(/[\p{L}\p{N}'’-]+/gu) ?? []).filter((word) => !STOP_WORDS.has(word));
    candidates.push({
      order: candidates.length,
      line,
      words,
      numbers: (text.match(/\d+/g) ?? []).length,
      names: (text.match(/(?<=\S\s+)\p{Lu}\p{Ll}+/gu) ?? []).length,
    });
  };
  for (const summary of request.priorSummaries) {
    for (const line of summary.content.split('\n')) {
      const trimmed = line.trim();
      if (trimmed !== '') add(trimmed, trimmed);
    }
  }
  for (const entry of request.entries) {
    if (entry.kind !== 'message') continue;
    const prefix = `[${formatTimestamp(entry.createdAt)}] ${entry.authorName}: `;
    for (const sentence of splitSentences(entry.content)) add(prefix + sentence, sentence);
  }
  return candidates;
}

function splitSentences(text: string): string[] {
  return text
    .replace(/\s+/g, ' ')
    .split(/(?<=[.!?])\s+(?=[\p{Lu}\p{N}"'(\[])/u)
    .map((sentence) => sentence.trim())
    .filter((sentence) => sentence !== '');
}

/** Rare words weigh more; numbers and names are what people come back for. */
function scoreCandidates(candidates: readonly Candidate[]): number[] {
  const documentFrequency = new Map<string, number>();
  for (const candidate of candidates) {
    for (const word of new Set(candidate.words)) documentFrequency.set(word, (documentFrequency.get(word) ?? 0) + 1);
  }
  const total = candidates.length;
  return candidates.map((candidate) => {
    const distinct = new Set(candidate.words);
    let information = 0;
    for (const word of distinct) information += Math.log(1 + total / documentFrequency.get(word)!);
    const length = candidate.words.length;
    const shape = length < 3 ? 0.4 : length > 60 ? 0.7 : 1;
    return ((information + 1.5 * candidate.numbers + 1.2 * candidate.names) / Math.sqrt(Math.max(1, length))) * shape *
      Math.log(2 + length);
  });
}
