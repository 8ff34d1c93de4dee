/**
 * One writer per data dir, readers beside it: real `magpie` processes on one data directory.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { ChannelRuntime } from '../src/channel/runtime.js';
import { EventStream } from '../src/common/events.js';
import { createExtractiveSummarizer } from '../src/compaction/extractive-summarizer.js';
import { DEFAULTS } from '../src/config/defaults.js';
import { LiveConfig } from '../src/config/live-config.js';
import { openMemoryStore } from '../src/memory/index.js';
import { openDatabase } from '../src/storage/database.js';
import { ALL_MIGRATIONS } from '../src/app/migrations.js';
import { ended, projectRoot, runMagpie, startChat } from './support/magpie-process.js';

const root = mkdtempSync(path.join(os.tmpdir(), 'magpie-lock-'));
after(() => rmSync(root, { recursive: true, force: true }));
const env = { PATH: process.env.PATH ?? '', USER: 'tester' };
let dirs = 0;
function freshDir(): string {
  dirs += 1;
  return path.join(root, `data-${dirs}`);
}

/** A `magpie chat` process (a writer) on `dataDir`, in the channel console:lock. */
function startLockChat(dataDir: string): Promise<ChildProcessWithoutNullStreams> {
  return startChat(['--data-dir', dataDir, '--channel', 'lock'], { cwd: root, env });
}

function transcriptFile(lines: Array<{ id: string; channel: string; content: string }>): string {
  const file = path.join(root, `t-${Math.random().toString(36).slice(2)}.jsonl`);
  writeFileSync(file, lines.map((line) => JSON.stringify({ author: 'ann', ...line })).join('\n') + '\n');
  return file;
}

async function eventually<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  for (let attempt = 0; attempt < 200; attempt += 1) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('one writer per data dir', { timeout: 180_000 }, () => {
  test('a second writer is refused at once, naming the holder, while readers work beside the writer', async () => {
    const dataDir = freshDir();
    const chat = await startLockChat(dataDir);
    try {
      chat.stdin.write('the zeppelin codeword is kestrel77\n');
      // The reader sees what the running writer stored (WAL, read-only connection).
      const found = await eventually(async () => {
        const run = await runMagpie(['memory', 'search', 'kestrel77', '--data-dir', dataDir, '--channel', 'console:lock', '--json'], { cwd: root, env });
        assert.equal(run.code, 0, run.stderr);
        const results = JSON.parse(run.stdout) as Array<{ content: string }>;
        return results.some((result) => result.content.includes('kestrel77')) ? results : undefined;
      }, 'the chat message to be searchable');
      assert.ok(found.length > 0);
      for (const args of [['memory', 'list'], ['memory', 'stats']]) {
        const run = await runMagpie([...args, '--data-dir', dataDir], { cwd: root, env });
        assert.equal(run.code, 0, `${args.join(' ')} works beside the writer: ${run.stderr}`);
      }

      const transcript = transcriptFile([{ id: 'r1', channel: 'c1', content: 'hello' }]);
      const replay = await runMagpie(['replay', transcript, '--data-dir', dataDir], { cwd: root, env });
      assert.equal(replay.code, 1);
      assert.match(replay.stderr, new RegExp(`is in use by magpie chat \\(pid ${chat.pid} on `));
      assert.match(replay.stderr, /hint: only one process may write a data dir at a time/);
      assert.doesNotMatch(replay.stderr, /\n\s+at /, 'no stack trace');
      // An erasure is not refused beside the writer (the running chat applies one); an id that
      // matches nothing is refused as without it.
      const forget = await runMagpie(['memory', 'forget', 'msg-99999', '--data-dir', dataDir], { cwd: root, env });
      assert.equal(forget.code, 1);
      assert.match(forget.stderr, /no memory or transcript entry with id 'msg-99999'/);
      const secondChat = await runMagpie(['chat', '--data-dir', dataDir], { cwd: root, env, input: 'hi\n' });
      assert.equal(secondChat.code, 1);
      assert.match(secondChat.stderr, /in use by magpie chat/);
    } finally {
      chat.stdin.end();
      assert.equal(await ended(chat), 0);
    }
    // Once the writer has gone, the next one gets in.
    const transcript = transcriptFile([{ id: 'r1', channel: 'c1', content: 'after the chat' }]);
    const replay = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: root, env });
    assert.equal(replay.code, 0, replay.stderr);
  });

  test('a writer killed with SIGKILL leaves no stale lock', async () => {
    const dataDir = freshDir();
    const chat = await startLockChat(dataDir);
    const owner = JSON.parse(readFileSync(path.join(dataDir, 'writer.json'), 'utf8')) as { pid: number; command: string };
    assert.equal(owner.pid, chat.pid);
    assert.equal(owner.command, 'magpie chat');
    chat.kill('SIGKILL');
    await ended(chat);
    const transcript = transcriptFile([{ id: 'k1', channel: 'c1', content: 'after the kill' }]);
    const replay = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: root, env });
    assert.equal(replay.code, 0, replay.stderr);
  });

  test('readers work on a read-only data dir (a read-only bind mount); a writer says what is wrong', async (context) => {
    const dataDir = freshDir();
    const transcript = transcriptFile(
      Array.from({ length: 30 }, (_, index) => ({ id: `m${index}`, channel: 'ro', content: `line ${index} mentions heron${index}` })),
    );
    const replay = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: root, env });
    assert.equal(replay.code, 0, replay.stderr);
    const mountPoint = path.join(root, `ro-${dirs}`);
    mkdirSync(mountPoint);
    const bind = spawnSync('mount', ['--bind', dataDir, mountPoint]);
    if (bind.status !== 0) {
      context.skip(`cannot bind-mount here (${bind.stderr?.toString().trim() || 'mount failed'}); CI runs as root`);
      return;
    }
    try {
      const remount = spawnSync('mount', ['-o', 'remount,bind,ro', mountPoint]);
      assert.equal(remount.status, 0, remount.stderr?.toString());
      const search = await runMagpie(['memory', 'search', 'heron17', '--data-dir', mountPoint, '--channel', 'ro', '--json'], { cwd: root, env });
      assert.equal(search.code, 0, search.stderr);
      assert.ok((JSON.parse(search.stdout) as Array<{ source_ids: string[] }>)[0]!.source_ids.includes('m17'));
      const stats = await runMagpie(['memory', 'stats', '--data-dir', mountPoint, '--json'], { cwd: root, env });
      assert.equal(stats.code, 0, stats.stderr);
      assert.equal((JSON.parse(stats.stdout) as { transcript_entries: number }).transcript_entries, 30);
      const write = await runMagpie(['replay', transcript, '--data-dir', mountPoint], { cwd: root, env });
      assert.equal(write.code, 1);
      assert.match(write.stderr, new RegExp(`${mountPoint.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      assert.doesNotMatch(write.stderr, /unexpected error|\n\s+at /);
    } finally {
      spawnSync('umount', [mountPoint]);
    }
  });

  test('garbage or a directory at writer.lock is moved aside; a damaged magpie.sqlite is named as such', async () => {
    const transcript = transcriptFile([{ id: 'g1', channel: 'c1', content: 'hello' }]);
    for (const plant of [(file: string) => writeFileSync(file, 'x'.repeat(200)), (file: string) => mkdirSync(file)]) {
      const dataDir = freshDir();
      mkdirSync(dataDir);
      plant(path.join(dataDir, 'writer.lock'));
      const run = await runMagpie(['replay', transcript, '--data-dir', dataDir, '--json'], { cwd: root, env });
      assert.equal(run.code, 0, run.stderr);
      assert.ok(readdirSync(dataDir).some((name) => name.startsWith('writer.lock.moved-')));
    }
    const damaged = freshDir();
    mkdirSync(damaged);
    writeFileSync(path.join(damaged, 'magpie.sqlite'), Buffer.alloc(20_000, 7));
    for (const args of [['replay', transcript], ['memory', 'search', 'hello', '--channel', 'c1']]) {
      const run = await runMagpie([...args, '--data-dir', damaged], { cwd: root, env });
      assert.equal(run.code, 1);
      assert.match(run.stderr, /holds a damaged database \(SQLITE_NOTADB/);
      assert.match(run.stderr, /hint: stop Magpie, keep a copy of the data dir/);
    }
  });

  test('two processes migrating a fresh data dir at once both succeed', async () => {
    const databaseModule = pathToFileURL(path.join(projectRoot(), 'dist/src/storage/database.js')).href;
    const migrationsModule = pathToFileURL(path.join(projectRoot(), 'dist/src/app/migrations.js')).href;
    for (let round = 0; round < 4; round += 1) {
      const dataDir = freshDir();
      const script = `const { openDatabase } = await import(${JSON.stringify(databaseModule)});
        const { ALL_MIGRATIONS } = await import(${JSON.stringify(migrationsModule)});
        const db = await openDatabase(${JSON.stringify(dataDir)}, ALL_MIGRATIONS); await db.close();`;
      const runs = await Promise.all(
        [0, 1].map(
          () =>
            new Promise<{ code: number | null; stderr: string }>((resolve) => {
              const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', 'pipe'] });
              let stderr = '';
              child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
              child.on('exit', (code) => resolve({ code, stderr }));
            }),
        ),
      );
      for (const run of runs) assert.equal(run.code, 0, run.stderr);
      const db = await openDatabase(dataDir, ALL_MIGRATIONS, { readOnly: true });
      const applied = (await db.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get()) as { n: number };
      await db.close();
      assert.equal(applied.n, ALL_MIGRATIONS.length);
    }
  });

  test('two runtimes misusing one database cannot drop a message silently: the sequence collision is an error', async () => {
    const dataDir = freshDir();
    const db = await openDatabase(dataDir, ALL_MIGRATIONS);
    const memory = await openMemoryStore({ db, dataDir, settings: { ...DEFAULTS.memory, dataDir } });
    const make = () =>
      new ChannelRuntime({ db, memory, config: new LiveConfig(DEFAULTS), events: new EventStream(), summarizer: createExtractiveSummarizer() });
    const first = make();
    const second = make();
    const message = (id: string) => ({ messageId: id, channelId: 'c', authorId: 'a', authorName: 'ann', role: 'user' as const, content: `text ${id}`, createdAt: 1 });
    try {
      await first.ingest(message('a1'));
      // The second runtime loaded the channel before a1 (lazily, now): make it stale first.
      await second.ingest(message('a1'));
      await first.ingest(message('a2'));
      await assert.rejects(second.ingest(message('b2')), /sequence number 2 is already taken by another message/);
      const rows = (await db.prepare("SELECT message_id FROM history_entries WHERE channel_id = 'c' ORDER BY seq").all()) as Array<{ message_id: string }>;
      assert.deepEqual(rows.map((row) => row.message_id), ['a1', 'a2']);
    } finally {
      await first.close();
      await second.close();
      await memory.close();
      await db.close();
    }
  });
});
