/**
 * Deterministic chat-like text for the memory benchmarks: speakers, everyday vocabulary with a
 * Zipf-like spread (a few very common words, a long tail of rare ones), numbers and names, in
 * short messages like a busy channel's.
 */

const NAMES = ['Alice', 'Bob', 'Carol', 'Dave', 'Erin', 'Frank', 'Grace', 'Heidi', 'Ivan', 'Judy', 'Mallory', 'Niaj', 'Olivia', 'Peggy', 'Rupert', 'Sybil', 'Trent', 'Victor', 'Walter', 'Yara'];
const OPENERS = ['I think', 'honestly', 'btw', 'so', 'ok so', 'yeah', 'lol', 'wait', 'hey', 'also', 'fwiw', 'not sure but', 'pretty sure', 'update:', 'quick question:'];
const TEMPLATES = [
  '{o} the {n} {v} {p} {t}',
  'did anyone {v} the {n} {p} the {n}?',
  '{o} we should {v} the {a} {n} before {t}',
  'my {n} is {a} again, {v} it {t}',
  'can someone {v} the {n}? it is {a}',
  '{o} the {a} {n} from {name} {v} really well',
  'remember to {v} the {n} {t}, {name} asked',
  '{o} {name} said the {n} costs {num} and the {n} is {a}',
  'going to {v} a {a} {n} {p} {name} {t}',
  'the {n} meeting moved to {t}, bring the {n}',
];
const STEMS =
  'project deploy server budget coffee lunch meeting release ticket bug review design garden bike trip flight hotel ' +
  'concert movie book recipe pizza ramen tea laptop phone keyboard monitor printer invoice contract client report ' +
  'dashboard database query cache cluster backup script sprint roadmap demo slide poster party birthday wedding ' +
  'puppy kitten vet doctor dentist gym yoga marathon hike beach cabin camera guitar piano painting pottery ' +
  'sourdough starter tomato basil sauce bread cheese wine beer cocktail playlist podcast episode season trailer ' +
  'ticket train bus car scooter parking rent lease mortgage tax refund salary bonus interview resume offer ' +
  'kernel compiler linter formatter container pipeline runner token secret password certificate domain email';
const ADJECTIVES = 'new old broken shiny slow fast cheap expensive weird great terrible quiet loud huge tiny spicy fresh late early remote local'.split(' ');
const VERBS = 'fix check move cancel book order try review ship test update buy sell clean paint cook plan share water schedule'.split(' ');
const PREPOSITIONS = 'with for near after before without under over'.split(' ');
const TIMES = ['tomorrow', 'tonight', 'on Monday', 'on Friday', 'next week', 'this weekend', 'in March', 'at 3pm', 'after lunch', 'later today'];

/** A small deterministic PRNG (mulberry32), so every run sees the same corpus. */
export function randomSource(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = state;
    value = Math.imul(value ^ (value >>> 15), value | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

/** Builds a vocabulary of `size` nouns: the stems, then made-up rare words for the long tail. */
function nouns(size: number, random: () => number): string[] {
  const words = STEMS.split(/\s+/);
  const syllables = ['ka', 'lo', 'mi', 'ren', 'tos', 'va', 'zu', 'qui', 'bar', 'del', 'fen', 'gor', 'hul', 'jin', 'pra', 'sel'];
  while (words.length < size) {
    const parts = 2 + Math.floor(random() * 2);
    let word = '';
    for (let index = 0; index < parts; index += 1) word += syllables[Math.floor(random() * syllables.length)];
    words.push(word);
  }
  return words;
}

export interface ChatLine {
  author: string;
  text: string;
}

/** `count` chat messages, deterministic for a seed. */
export function chatLines(count: number, seed = 42): ChatLine[] {
  const random = randomSource(seed);
  const vocabulary = nouns(5000, random);
  // Zipf-like: index = floor(size * u^3) favours the first (common) words heavily.
  const noun = (): string => vocabulary[Math.floor(vocabulary.length * random() ** 3)]!;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const lines: ChatLine[] = [];
  for (let index = 0; index < count; index += 1) {
    const template = pick(TEMPLATES);
    const text = template.replace(/\{(\w+)\}/g, (_, slot: string) => {
      switch (slot) {
        case 'o': return pick(OPENERS);
        case 'n': return noun();
        case 'v': return pick(VERBS);
        case 'a': return pick(ADJECTIVES);
        case 'p': return pick(PREPOSITIONS);
        case 't': return pick(TIMES);
        case 'name': return pick(NAMES);
        default: return String(Math.floor(random() * 1000));
      }
    });
    lines.push({ author: pick(NAMES), text });
  }
  return lines;
}
