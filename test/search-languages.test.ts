/**
 * Every script is searchable, and SQLite and PostgreSQL agree: messages in Chinese, Japanese,
 * Korean, Thai, Arabic, Russian, German and emoji-laden English are each found by a word or two
 * of theirs, a closed compound by its words written apart, identifiers match however they are
 * written, and both backends return the same top 5.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULTS } from '../src/config/defaults.js';
import { openMemoryStore, type SearchResult, type TranscriptEntryInput } from '../src/memory/index.js';
import { openDatabase } from '../src/storage/database.js';
import type { SqlClient } from '../src/storage/sql-client.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { withBothBackends, withTempDir } from './support/both-backends.js';
import { requirePostgres } from './support/postgres-available.js';

/** [id, author, text, queries that must find it first]. */
const PLANTED: Array<[string, string, string, string[]]> = [
  ['zh', 'Lin', '我们下周三在上海办公室开会，讨论季度报告。', ['上海', '季度报告', '上海 开会', '办公室']],
  ['ja', 'Yuki', '明日のリリースは延期になりました。ごめんなさい！', ['リリース 延期', '延期', 'リリース']],
  ['ko', 'Minji', '다음 주 회의를 금요일로 연기합니다', ['회의', '금요일', '회의 연기']],
  ['th', 'Somchai', 'พรุ่งนี้ประชุมที่กรุงเทพตอนเก้าโมง', ['ประชุม', 'กรุงเทพ']],
  ['ar', 'Layla', 'سنلتقي في المكتبة يوم الخميس بعد الظهر', ['المكتبة', 'الخميس']],
  ['ru', 'Ivan', 'Встреча перенесена на пятницу из-за отпуска Ольги', ['пятницу', 'встреча отпуска']],
  ['de', 'Jonas', 'Die Kaffeemaschine im Büro ist kaputt, der Donaudampfschifffahrtskapitän lacht', ['Kaffeemaschine', 'Donaudampfschifffahrtskapitän', 'buro kaputt', 'Kaffee Maschine']],
  ['compound', 'Rui', 'Bring the icecream maker to the picnic on Sunday', ['ice cream', 'icecream maker']],
  ['emoji', 'Sam', '🎉🎉 PIZZA party tonight at 8!!! 🍕🍕 bring drinks 🥤🥤', ['pizza party', 'drinks']],
  ['bill', 'Ops', 'I filed BILL-4821 for the broken invoice export', ['BILL-4821', 'BILL 4821', '4821', 'bill-4821']],
  ['version', 'Dev', 'Release v2.3.1 fixes the login redirect', ['v2.3.1', 'login redirect']],
  ['ticket', 'Dev', 'The crash is tracked in #1234, assigned to Priya', ['#1234', '1234']],
  ['mail', 'Ops', 'Send the logs to ops@example.org when it happens again', ['ops@example.org']],
  ['snake', 'Dev', 'Set max_retry_count to five in the worker config', ['max_retry_count']],
  // Joined or camelCase, the last part loses its ending to the stemmer ("bytes" → "byt") as a
  // word would, while the identifier is stored as written: each spelling finds the other.
  ['snake-stemmed', 'Dev', 'Set max_upload_bytes to 5MB on staging', ['max_upload_bytes', 'maxuploadbytes', 'maxUploadBytes', 'MAX-UPLOAD-BYTES', 'what is maxUploadBytes?']],
  ['camel-stemmed', 'Dev', 'The retryDelays setting is read once at start', ['retryDelays', 'retry_delays', 'retrydelays']],
  ['camel', 'Dev', 'We went with PostgreSQL 16, not MongoDB', ['postgresql', 'MongoDB']],
];

/** Lines that share words with the planted ones without being what is looked for. */
const FILLER: Array<[string, string]> = [
  ['Ana', 'The office plants need water on Mondays'],
  ['Ben', 'Pizza again? We had pizza yesterday'],
  ['Cleo', 'Invoice numbers are on the second page'],
  ['Ana', 'Release notes go in the changelog, not in chat'],
  ['Ben', 'Login works for me on the staging server'],
  ['Lin', '报告已经发给大家了'],
  ['Yuki', '了解しました。ありがとうございます'],
  ['Minji', '감사합니다 좋은 하루 되세요'],
  ['Ivan', 'Спасибо, увидимся завтра'],
  ['Jonas', 'Guten Morgen zusammen'],
  ['Cleo', 'Config files live in the repo root'],
  ['Ana', 'Bill said the party is cancelled'],
];

function entries(channelId: string): TranscriptEntryInput[] {
  const lines: Array<[string, string, string]> = [
    ...PLANTED.map(([id, author, text]): [string, string, string] => [id, author, text]),
    ...FILLER.map(([author, text], index): [string, string, string] => [`filler-${index}`, author, text]),
  ];
  return lines.map(([id, authorName, content], index) => ({
    channelId,
    messageId: id,
    authorId: authorName.toLowerCase(),
    authorName,
    content,
    createdAt: 1_700_000_000_000 + index * 3_600_000,
  }));
}

const QUERIES = PLANTED.flatMap(([id, , , queries]) => queries.map((query) => ({ id, query })));

async function searchAll(db: SqlClient, dataDir: string): Promise<SearchResult[][]> {
  const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
  try {
    await store.archiveTranscript(entries('langs'));
    await store.whenIndexed();
    // The channel's vector index loaded and caught up, as a running bot's would be.
    await store.warmIndexes(['langs']);
    await store.whenIndexed();
    const results: SearchResult[][] = [];
    for (const { query } of QUERIES) results.push(await store.search({ location: { channelId: 'langs' }, query, limit: 5 }));
    return results;
  } finally {
    await store.close();
  }
}

function checkFound(results: SearchResult[][], backend: string): void {
  QUERIES.forEach(({ id, query }, position) => {
    const top = results[position]![0];
    assert.equal(top?.message_id, id, `${backend}: "${query}" should find message ${id} first, got ${JSON.stringify(top?.content)}`);
  });
}

test('a word or two finds its message in every script, on SQLite', async () => {
  await withTempDir(async (sqliteDir) => {
    const db = await openDatabase(sqliteDir, ALL_MIGRATIONS);
    try {
      checkFound(await searchAll(db, sqliteDir), 'SQLite');
    } finally {
      await db.close();
    }
  });
});

test('a word or two finds its message in every script on PostgreSQL, with the same top 5 as SQLite', async (t) => {
  if (!(await requirePostgres(t))) return;
  await withBothBackends('search-languages test', async (sqlite, postgres) => {
    const expected = await searchAll(sqlite.db, sqlite.dir);
    const actual = await searchAll(postgres.db, postgres.dir);
    checkFound(actual, 'PostgreSQL');
    const hits = (results: SearchResult[][]) => results.map((list) => list.map((result) => [result.message_id, result.score]));
    assert.deepEqual(hits(actual), hits(expected));
  });
});

/** A small deterministic generator (mulberry32), so the corpus is the same on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = Math.imul(state ^ (state >>> 15), 1 | state);
    value = (value + Math.imul(value ^ (value >>> 7), 61 | value)) ^ value;
    return ((value ^ (value >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const WORDS = (
  'deploy server budget invoice meeting release login crash backup rollback database schema ticket customer ' +
  'PostgreSQL MongoDB iPhone GitHub Kubernetes staging Friday Monday October weekend kayak tent cello kittens ' +
  '上海 北京 会议 报告 延期 リリース 会議 회의 연기 Встреча пятницу Kaffeemaschine Straße café naïve'
).split(' ');

function generatedWord(next: () => number): string {
  const roll = next();
  const number = Math.floor(next() * 5000);
  if (roll < 0.06) return `BILL-${number}`;
  if (roll < 0.1) return `v${number % 4}.${number % 10}.${number % 7}`;
  if (roll < 0.14) return `#${number}`;
  if (roll < 0.17) return `user${number % 9}@host${number % 5}`;
  if (roll < 0.2) return `max_${WORDS[number % 12]!.toLowerCase()}_count`;
  if (roll < 0.26) return String(number);
  return WORDS[Math.floor(next() * WORDS.length)]!;
}

function generatedText(next: () => number): string {
  const length = 3 + Math.floor(next() * 10);
  return Array.from({ length }, () => generatedWord(next)).join(next() < 0.5 ? ' ' : ', ');
}

test('a generated corpus gives the same top 5 on SQLite and PostgreSQL for identifiers, numbers, mixed case and every script', async (t) => {
  if (!(await requirePostgres(t))) return;
  const next = random(20231003);
  const authors = ['Ana', 'Ben', 'Cleo', 'Dev'];
  const corpus: TranscriptEntryInput[] = Array.from({ length: 400 }, (_, index) => ({
    channelId: index % 4 === 0 ? 'elsewhere' : 'generated',
    messageId: `g${index}`,
    authorId: authors[index % 4]!.toLowerCase(),
    authorName: authors[index % 4]!,
    content: generatedText(next),
    createdAt: 1_700_000_000_000 + index * 60_000,
  }));
  const queries = [
    ...Array.from({ length: 30 }, () => generatedText(next).split(/[ ,]+/).slice(0, 2).join(' ')),
    'BILL-42',
    'v2.3.1',
    '#1234',
    'user3@host3',
    'max_server_count',
    'POSTGRESQL',
    'postgresql',
    '上海 会议',
    'リリース',
    'cafe naive',
    'what about the crash on Friday?',
  ];
  const search = async (db: SqlClient, dataDir: string): Promise<Array<Array<[string, number]>>> => {
    const store = await openMemoryStore({ db, dataDir, settings: DEFAULTS.memory });
    try {
      await store.archiveTranscript(corpus);
      await store.whenIndexed();
      await store.warmIndexes(['generated']);
      await store.whenIndexed();
      const lists: Array<Array<[string, number]>> = [];
      for (const query of queries) {
        const results = await store.search({ location: { channelId: 'generated' }, query, limit: 5 });
        lists.push(results.map((result) => [result.message_id ?? result.id, result.score]));
      }
      return lists;
    } finally {
      await store.close();
    }
  };
  await withBothBackends('search-languages test', async (sqlite, postgres) => {
    const expected = await search(sqlite.db, sqlite.dir);
    const actual = await search(postgres.db, postgres.dir);
    assert.ok(expected.filter((list) => list.length > 0).length >= queries.length - 2, 'nearly every query finds something');
    // Same tokens, same BM25 statistics, same vectors: the same ids in the same order, and the
    // same scores (both backends compute BM25 in double precision from the same counts).
    assert.deepEqual(
      actual.map((list) => list.map(([id]) => id)),
      expected.map((list) => list.map(([id]) => id)),
    );
    actual.forEach((list, position) =>
      list.forEach(([, score], rank) => assert.ok(Math.abs(score - expected[position]![rank]![1]) < 1e-3, `score of "${queries[position]}" #${rank}`)),
    );
  });
});
