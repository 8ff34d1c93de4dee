/** `magpie replay` as a real process: tiers, determinism, bad lines, kill -9 and re-run. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HistoryStore } from '../src/channel/history-store.js';
import { assertConsistentHistory, generateTranscript, tempDir } from './compaction-support.js';
import { magpieEnv } from './support/magpie-process.js';
import pg from 'pg';
import { openTestDatabase, storageEnv } from './support/storage.js';

const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

function replay(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [MAIN, 'replay', ...args], {
    encoding: 'utf8',
    env: magpieEnv(['replay', ...args], { cwd: process.cwd(), env: { ...process.env, MAGPIE_DATA_DIR: '' } }),
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

function jsonLines(stdout: string): Array<Record<string, unknown>> {
  return stdout.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Events without what legitimately differs between runs (measured durations and speeds). */
function comparable(events: Array<Record<string, unknown>>): Array<Record<string, unknown>> {
  return events.map(({ duration_ms: _duration, messages_per_second: _speed, ...rest }) => rest);
}

test('a small window with --worker-lag fires all three tiers, and two runs emit the same events', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 'transcript.jsonl');
  writeFileSync(transcript, generateTranscript(400));
  const runs = [1, 2].map((run) =>
    replay([transcript, '--data-dir', join(dir.path, `data-${run}`), '--context-window', '2000', '--worker-lag', '5', '--json']),
  );
  for (const run of runs) assert.equal(run.code, 0, run.stderr);
  const [first, second] = runs.map((run) => jsonLines(run.stdout));
  const summary = first!.at(-1)!;
  assert.equal(summary.type, 'replay_summary');
  assert.equal(summary.messages, 400);
  assert.equal(summary.channels, 2);
  const tiers = summary.tiers as Record<string, number>;
  assert.ok(tiers.background! > 0 && tiers.aggressive! > 0 && tiers.emergency! > 0, JSON.stringify(tiers));
  assert.ok(Number(summary.messages_per_second) > 0);
  for (const type of ['compaction_triggered', 'compaction_completed', 'emergency_truncation']) {
    assert.ok(first!.some((event) => event.type === type), type);
  }
  assert.deepEqual(comparable(first!), comparable(second!));
  for (const event of first!) assert.equal(event.content, undefined, 'no message content in events');

  const db = await openTestDatabase(join(dir.path, 'data-1'));
  for (const channel of ['chan-0', 'chan-1']) assert.equal((await assertConsistentHistory(db, channel)).archived, 200);
  await db.close();
  dir.remove();
});

test('a bad line stops the replay with exit 1, names line and field, and keeps what came before', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 'bad.jsonl');
  const good = generateTranscript(3, { channels: 1 }).trim().split('\n');
  writeFileSync(transcript, `${good[0]}\n\n${good[1]}\n{"id":"x","channel":"chan-0","author":"ann"}\n${good[2]}\n`);
  const result = replay([transcript, '--data-dir', join(dir.path, 'data')]);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /line 4/);
  assert.match(result.stderr, /"content"/);
  const db = await openTestDatabase(join(dir.path, 'data'));
  assert.deepEqual((await new HistoryStore(db).archive('chan-0')).map((entry) => entry.messageId), ['msg-0', 'msg-1']);
  await db.close();

  writeFileSync(transcript, 'not json\n');
  assert.match(replay([transcript, '--data-dir', join(dir.path, 'data')]).stderr, /line 1: is not valid JSON/);
  dir.remove();
});

test('a second --data-dir on PostgreSQL shares the schema of [storage]: the replay says so, naming it', () => {
  const dir = tempDir();
  const transcript = join(dir.path, 'transcript.jsonl');
  writeFileSync(transcript, generateTranscript(40));
  // One [storage] for both runs, as one config.toml gives them (nothing on SQLite).
  const shared = storageEnv(join(dir.path, 'run-a'));
  const run = (data: string) => {
    const args = [transcript, '--data-dir', join(dir.path, data), '--json'];
    const result = spawnSync(process.execPath, [MAIN, 'replay', ...args], {
      encoding: 'utf8',
      env: magpieEnv(['replay', ...args], { cwd: process.cwd(), env: { ...process.env, MAGPIE_DATA_DIR: '', ...shared } }),
    });
    assert.equal(result.status, 0, result.stderr);
    return { summary: jsonLines(result.stdout).at(-1)!, stderr: result.stderr };
  };
  const first = run('run-a');
  assert.equal(first.summary.messages, 40);
  assert.doesNotMatch(first.stderr, /already stored/);
  const second = run('run-b');
  if (shared.MAGPIE_STORAGE_SCHEMA === undefined) {
    assert.equal(second.summary.messages, 40, 'a data dir of its own on SQLite');
    assert.doesNotMatch(second.stderr, /already stored/);
  } else {
    assert.equal(second.summary.duplicates, 40);
    assert.match(second.stderr, new RegExp(`note: 40 lines were already stored in PostgreSQL schema ${shared.MAGPIE_STORAGE_SCHEMA}: on PostgreSQL every --data-dir shares`));
    assert.match(second.stderr, /give each replay a schema of its own/);
  }
  dir.remove();
});

test('flags: --help, unknown flags, --summarizer llm without a model', () => {
  assert.equal(replay(['--help']).code, 0);
  assert.equal(replay(['x.jsonl', '--data-dir', '/tmp/x', '--bogus']).code, 2);
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(2));
  const llm = replay([transcript, '--data-dir', join(dir.path, 'data'), '--summarizer', 'llm']);
  assert.notEqual(llm.code, 0);
  assert.match(llm.stderr, /needs a model/);
  dir.remove();
});

test('--summarizer llm and --cost-replies without a model are refused before the data dir is written', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  writeFileSync(transcript, generateTranscript(2));
  for (const flag of [['--summarizer', 'llm'], ['--cost-replies']]) {
    const dataDir = join(dir.path, `data${flag[0]}`);
    const run = replay([transcript, '--data-dir', dataDir, ...flag]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, new RegExp(`${flag.join(' ')} needs a model: \\[llm\\] model is empty`));
    assert.equal(existsSync(dataDir), false, `${flag.join(' ')}: no data dir, database, index or lock left behind`);
    assert.deepEqual(await schemaTables(dataDir), [], `${flag.join(' ')}: no schema written`);
  }
  dir.remove();
});

test('--json prints compaction_skipped: an emergency with only the current turn live', () => {
  const dir = tempDir();
  const transcript = join(dir.path, 't.jsonl');
  // A reply, then a long question and a long answer: the emergency comes with the answer, when
  // nothing before the turn being answered is left to drop.
  const lines = [
    { id: 'a0', author: 'bot', role: 'assistant', content: 'hello there' },
    { id: 'a1', author: 'ann', role: 'user', content: randomWords(300, 1) },
    { id: 'a2', author: 'bot', role: 'assistant', content: randomWords(300, 2) },
  ].map((line, index) => JSON.stringify({ ...line, channel: 'c1', ts: `2024-01-01T00:00:0${index}Z` }));
  writeFileSync(transcript, `${lines.join('\n')}\n`);
  const run = replay([transcript, '--data-dir', join(dir.path, 'data'), '--context-window', '2000', '--json']);
  assert.equal(run.code, 0, run.stderr);
  const events = jsonLines(run.stdout);
  assert.deepEqual(
    events.find((event) => event.type === 'compaction_skipped'),
    { type: 'compaction_skipped', channel_id: 'c1', tier: 'emergency', reason: 'only_current_turn_live' },
  );
  dir.remove();
});

/** `count` six-letter words that compress badly (a token each or more), the same for a seed. */
function randomWords(count: number, seed: number): string {
  let state = seed;
  const letter = (): string => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return 'abcdefghijklmnop'[state % 16]!;
  };
  return Array.from({ length: count }, () => Array.from({ length: 6 }, letter).join('')).join(' ');
}

/** The tables of a data dir's PostgreSQL schema on a PostgreSQL run (none on SQLite). */
async function schemaTables(dataDir: string): Promise<string[]> {
  const env = storageEnv(dataDir);
  if (env.MAGPIE_STORAGE_SCHEMA === undefined) return [];
  const client = new pg.Client({ connectionString: env.MAGPIE_DATABASE_URL });
  await client.connect();
  try {
    const rows = await client.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [env.MAGPIE_STORAGE_SCHEMA]);
    return rows.rows.map((row: { table_name: string }) => row.table_name);
  } finally {
    await client.end();
  }
}

test('8. kill -9 mid-replay, then a re-run on the same data dir: consistent, nothing lost, nothing doubled', async () => {
  const dir = tempDir();
  const transcript = join(dir.path, 'big.jsonl');
  // The kill comes after about 150 messages (15 compactions with this window); the re-run does
  // the rest, which on PostgreSQL is most of this file's time.
  const total = 1500;
  writeFileSync(transcript, generateTranscript(total, { channels: 3 }));
  const data = join(dir.path, 'data');
  const args = ['replay', transcript, '--data-dir', data, '--context-window', '2000', '--worker-lag', '4', '--json'];
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: magpieEnv(args, { cwd: process.cwd(), env: process.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let seen = 0;
  let finished = false;
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString().split('\n').filter((line) => line.includes('"compaction_completed"')).length;
      if (seen >= 15 && !child.killed) child.kill('SIGKILL');
    });
    child.on('exit', (_code, signal) => {
      finished = signal !== 'SIGKILL';
      resolve();
    });
  });
  assert.equal(finished, false, 'the replay was killed mid-run (make the transcript longer if this fails)');

  let db = await openTestDatabase(data);
  const partial = await Promise.all(['chan-0', 'chan-1', 'chan-2'].map(async (channel) => (await assertConsistentHistory(db, channel)).archived));
  await db.close();
  const kept = partial.reduce((sum, count) => sum + count, 0);
  assert.ok(kept > 0 && kept < total, `killed after ${kept} messages`);

  const rerun = replay([transcript, '--data-dir', data, '--context-window', '2000', '--worker-lag', '4', '--json']);
  assert.equal(rerun.code, 0, rerun.stderr);
  const summary = jsonLines(rerun.stdout).at(-1)!;
  assert.equal(Number(summary.messages) + Number(summary.duplicates), total);
  assert.equal(summary.duplicates, kept);

  db = await openTestDatabase(data);
  const ids = new Set<string>();
  for (const channel of ['chan-0', 'chan-1', 'chan-2']) {
    await assertConsistentHistory(db, channel);
    for (const entry of await new HistoryStore(db).archive(channel)) {
      assert.equal(ids.has(entry.messageId), false, 'no message twice');
      ids.add(entry.messageId);
    }
  }
  assert.equal(ids.size, total);
  const unarchived = (await db.prepare('SELECT COUNT(*) AS n FROM history_entries WHERE archived = 0').get()) as { n: number };
  assert.equal(unarchived.n, 0, 'every message reached the transcript index');
  const transcriptRows = (await db.prepare("SELECT COUNT(*) AS n FROM memory_items WHERE kind = 'transcript'").get()) as { n: number };
  assert.equal(transcriptRows.n, total);
  await db.close();
  dir.remove();
});
