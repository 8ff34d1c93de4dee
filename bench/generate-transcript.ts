/**
 * Writes a synthetic, deterministic long conversation in the replay format, for tuning
 * compaction (`magpie replay`) and for the README's tuning table:
 *
 *   node dist/bench/generate-transcript.js --messages 6000 --channels 2 --out bench-data/long.jsonl
 *
 * People plan trips, releases and dinners, state preferences and numbers, ask each other
 * questions and answer; message lengths vary from a few words to a paragraph, and now and then
 * someone pastes a long log, so usage climbs unevenly as in a real channel. Same flags, same
 * file, byte for byte.
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';

const PEOPLE = ['Ana', 'Bilal', 'Chen', 'Dara', 'Emeka', 'Fiona', 'Goran', 'Hana'];
const TOPICS = [
  { subject: 'the release', facts: ['freeze is on {day}', 'version {n}.{m} ships with the new importer', 'the rollback plan lives in runbook {n}'] },
  { subject: 'the offsite', facts: ['we booked {n} rooms in Lisbon', 'the budget is {n}00 euros a head', 'the bus leaves at {h}:30'] },
  { subject: 'the database', facts: ['Postgres {n} is the target', 'the migration takes {n} minutes on staging', 'replica lag peaked at {n} seconds'] },
  { subject: 'dinner', facts: ['{person} is vegetarian', 'the place on {street} Street takes {n} people', '{person} cannot come before {h} pm'] },
  { subject: 'the garden', facts: ['the tomatoes need water every {n} days', '{person} planted {n} basil pots', 'the shed key is under the {thing}'] },
  { subject: 'hiring', facts: ['{person} interviews on {day}', 'we have {n} candidates left', 'the take-home takes {n} hours'] },
];
const DAYS = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday'];
const STREETS = ['Elm', 'Harbour', 'Mill', 'Station', 'Orchard'];
const THINGS = ['blue pot', 'doormat', 'third stone', 'watering can'];
const FILLERS = [
  'sounds good to me',
  'agreed, let us do that',
  'can someone double-check this before Friday?',
  'I will write it down in the notes',
  'not sure, I need to ask around first',
  'that changes the plan a bit, but it is fine',
  'thanks, that helps a lot',
  'let us revisit this next week when we know more',
];

/** Mulberry32: a tiny seeded generator, so the file is the same on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export function* syntheticTranscript(options: { messages: number; channels: number; seed: number }): Generator<string> {
  const next = random(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const fill = (template: string) =>
    template
      .replace('{day}', pick(DAYS))
      .replace('{n}', String(2 + Math.floor(next() * 40)))
      .replace('{m}', String(Math.floor(next() * 10)))
      .replace('{h}', String(5 + Math.floor(next() * 6)))
      .replace('{person}', pick(PEOPLE))
      .replace('{street}', pick(STREETS))
      .replace('{thing}', pick(THINGS));
  const start = Date.UTC(2026, 0, 5, 9);
  for (let index = 0; index < options.messages; index += 1) {
    const topic = pick(TOPICS);
    const roll = next();
    let content: string;
    if (roll < 0.35) content = `About ${topic.subject}: ${fill(pick(topic.facts))}.`;
    else if (roll < 0.55) content = `Quick question on ${topic.subject}: did we settle that ${fill(pick(topic.facts))}?`;
    else if (roll < 0.85) content = `${pick(FILLERS)[0]!.toUpperCase()}${pick(FILLERS).slice(1)}. ${fill(pick(topic.facts))}, right?`;
    else if (roll < 0.97) {
      const sentences = Array.from({ length: 3 + Math.floor(next() * 5) }, () => `${fill(pick(pick(TOPICS).facts))}`);
      content = `Summary of where I think we are: ${sentences.join('; ')}. ${pick(FILLERS)}.`;
    } else {
      // A pasted log: the kind of message that makes usage jump.
      const lines = Array.from({ length: 10 + Math.floor(next() * 30) }, (_, line) => `${line + 1} INFO worker-${Math.floor(next() * 9)} step ${fill('{n}')} ok`);
      content = `Here is the log from ${topic.subject}:\n${lines.join('\n')}`;
    }
    const line = {
      id: `syn-${index}`,
      channel: `synthetic-${index % options.channels}`,
      author: pick(PEOPLE),
      content,
      ts: start + index * 47_000 + Math.floor(next() * 40_000),
    };
    yield JSON.stringify(line);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      messages: { type: 'string', default: '6000' },
      channels: { type: 'string', default: '2' },
      seed: { type: 'string', default: '12' },
      out: { type: 'string' },
    },
  });
  const messages = Number(values.messages);
  const channels = Number(values.channels);
  const seed = Number(values.seed);
  if (!Number.isSafeInteger(messages) || messages < 1) throw new Error(`--messages needs a whole number of at least 1, got '${values.messages}'`);
  if (!Number.isSafeInteger(channels) || channels < 1) throw new Error(`--channels needs a whole number of at least 1, got '${values.channels}'`);
  if (!Number.isSafeInteger(seed)) throw new Error(`--seed needs a whole number, got '${values.seed}'`);
  if (values.out !== undefined) mkdirSync(dirname(values.out), { recursive: true });
  const out: NodeJS.WritableStream = values.out === undefined ? process.stdout : createWriteStream(values.out);
  for (const line of syntheticTranscript({ messages, channels, seed })) {
    if (!out.write(`${line}\n`)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
  }
  if (out !== process.stdout) await new Promise<void>((resolve) => out.end(() => resolve()));
}

if (process.argv[1]?.endsWith('generate-transcript.js')) await main();
