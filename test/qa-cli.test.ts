import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { appEnv, withTestStorage } from './support/storage.js';
import { magpieEnv } from './support/magpie-process.js';

const MAIN = fileURLToPath(new URL('../src/cli/main.js', import.meta.url));

function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'magpie-qa-'));
}

function transcript(lines: number): string {
  return Array.from({ length: lines }, (_, index) =>
    JSON.stringify({
      id: `m${index}`,
      channel: index % 2 === 0 ? 'c1' : 'c2',
      author: index % 3 === 0 ? 'ana' : 'bo',
      content: `Message ${index}: we agreed the number is ${index * 17}. ${'Some more words to fill the window. '.repeat(index % 4)}`,
    }),
  ).join('\n');
}

function run(args: string[], cwd: string) {
  return spawnSync(process.execPath, [MAIN, ...args], { cwd, encoding: 'utf8', env: magpieEnv(args, { cwd, env: { PATH: process.env.PATH, HOME: cwd } }) });
}

test('replay --json | head: a reader that leaves early does not crash the replay, which still completes', async () => {
  const dir = tempDir();
  try {
    writeFileSync(path.join(dir, 't.jsonl'), transcript(200));
    const dataDir = path.join(dir, 'data');
    const args = ['replay', 't.jsonl', '--data-dir', dataDir, '--context-window', '2000', '--json'];
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: dir,
      env: magpieEnv(args, { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    // Like `head -1`: read the first line, then close the pipe.
    await new Promise<void>((resolve) => {
      child.stdout.once('data', () => {
        child.stdout.destroy();
        resolve();
      });
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.doesNotMatch(stderr, /EPIPE|Unhandled|\n\s+at /, stderr);
    assert.equal(code, 0, stderr);
    // The data dir holds the whole transcript: a re-run finds every message already there.
    const again = run(['replay', 't.jsonl', '--data-dir', dataDir, '--context-window', '2000', '--json'], dir);
    assert.equal(again.status, 0, again.stderr);
    const summary = JSON.parse(again.stdout.trim().split('\n').at(-1)!);
    assert.equal(summary.type, 'replay_summary');
    assert.equal(summary.duplicates, 200);
    assert.equal(summary.messages, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a data dir that cannot be used is named in one line, without a stack trace', () => {
  const dir = tempDir();
  try {
    writeFileSync(path.join(dir, 't.jsonl'), transcript(3));
    writeFileSync(path.join(dir, 'a-file'), 'not a directory');
    for (const dataDir of ['a-file', path.join('a-file', 'sub')]) {
      const result = run(['replay', 't.jsonl', '--data-dir', dataDir], dir);
      assert.equal(result.status, 1, result.stderr);
      assert.match(result.stderr, /^magpie replay: cannot open the data directory .*a-file.*: E[A-Z]+: /);
      assert.match(result.stderr, /hint: point --data-dir, MAGPIE_DATA_DIR or \[memory\] data_dir at a directory/);
      assert.doesNotMatch(result.stderr, /unexpected error|\n\s+at /);
    }
    const chat = spawnSync(process.execPath, [MAIN, 'chat', '--data-dir', 'a-file'], { cwd: dir, encoding: 'utf8', input: 'hello\n' });
    assert.equal(chat.status, 1, chat.stderr);
    assert.match(chat.stderr, /^magpie chat: cannot open the data directory .*a-file/);
    const memory = run(['memory', 'stats', '--data-dir', 'a-file'], dir);
    assert.notEqual(memory.status, 0);
    assert.doesNotMatch(memory.stderr, /unexpected error|\n\s+at /);
    assert.doesNotMatch(chat.stderr, /\n\s+at /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('replay names a transcript that is a directory instead of failing on a bare EISDIR', () => {
  const dir = tempDir();
  try {
    mkdirSync(path.join(dir, 'folder.jsonl'));
    const result = run(['replay', 'folder.jsonl', '--data-dir', path.join(dir, 'data')], dir);
    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, /transcript is not a file: .*folder\.jsonl/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('after a bad line, replay counts the lines before it that a re-run found already present', () => {
  const dir = tempDir();
  try {
    writeFileSync(path.join(dir, 't.jsonl'), `${transcript(4)}\n{not json\n`);
    const dataDir = path.join(dir, 'data');
    assert.equal(run(['replay', 't.jsonl', '--data-dir', dataDir], dir).status, 1);
    const again = run(['replay', 't.jsonl', '--data-dir', dataDir], dir);
    assert.equal(again.status, 1);
    assert.match(again.stderr, /transcript line 5: is not valid JSON/);
    assert.match(again.stderr, /the 4 messages before it are in /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('replay --summarizer llm: memories saved by workers carry the transcript time (two runs write the same rows)', async () => {
  const { startFakeAnthropic } = await import('./fakes/fake-anthropic.js');
  const model = await startFakeAnthropic();
  const dir = tempDir();
  try {
    let calls = 0;
    model.setDefault((request) => {
      calls += 1;
      const last = request.body.messages.at(-1);
      const answered = Array.isArray(last?.content) && last.content.some((block: { type: string }) => block.type === 'tool_result');
      if (answered) return { text: 'The group agreed on numbers.' };
      return { toolUse: [{ name: 'memory_save', input: { content: `the team agreed on number ${calls}`, memory_type: 'decision' } }] };
    });
    const start = Date.UTC(2024, 5, 1);
    // A window with room for a summary request beside its range (summary_min_tokens and the
    // summarizer's own prompt), so workers run rather than emergency truncation alone.
    const lines = Array.from({ length: 150 }, (_, index) =>
      JSON.stringify({ id: `m${index}`, channel: 'c1', author: 'ana', content: `Point ${index}: ${'we keep talking about numbers. '.repeat(3)}`, ts: start + index * 60_000 }),
    );
    writeFileSync(path.join(dir, 't.jsonl'), lines.join('\n'));
    writeFileSync(path.join(dir, 'config.toml'), `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n`);
    const dataDir = path.join(dir, 'data');
    const args = ['replay', 't.jsonl', '--data-dir', dataDir, '--summarizer', 'llm', '--context-window', '4000', '--json'];
    const child = spawn(process.execPath, [MAIN, ...args], {
      cwd: dir,
      env: magpieEnv(args, { cwd: dir, env: { PATH: process.env.PATH, HOME: dir } }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    assert.equal(await new Promise((resolve) => child.on('close', resolve)), 0, stderr);
    const summary = JSON.parse(stdout.trim().split('\n').at(-1)!);
    assert.ok(summary.memories_saved > 0, stdout);
    const search = run(['memory', 'search', 'team agreed number', '--data-dir', dataDir, '--channel', 'c1', '--kind', 'memory', '--json'], dir);
    assert.equal(search.status, 0, search.stderr);
    const results = JSON.parse(search.stdout) as Array<{ created_at: string }>;
    assert.ok(results.length > 0, search.stdout);
    for (const result of results) {
      const at = Date.parse(result.created_at);
      assert.ok(at >= start && at <= start + 150 * 60_000, `created_at ${result.created_at} is a transcript time`);
    }
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('openApp passes its event stream to memory: a vector rebuild after an embedder change is an event (and a log line)', async () => {
  const { openApp } = await import('../src/app/index.js');
  const { EventStream } = await import('../src/common/events.js');
  const { DEFAULTS } = await import('../src/config/defaults.js');
  const dir = tempDir();
  try {
    const config = (hashDimension: number) => withTestStorage({ ...DEFAULTS, memory: { ...DEFAULTS.memory, dataDir: dir, hashDimension } });
    const first = await openApp({ config: config(256), env: appEnv() });
    await first.runtime.ingest({ messageId: 'm1', channelId: 'c1', authorId: 'a', authorName: 'ana', role: 'user', content: 'the boiler code is 4471', createdAt: Date.now() });
    await first.close();
    const events = new EventStream();
    const seen: string[] = [];
    events.subscribe((event) => seen.push(event.type));
    const second = await openApp({ config: config(128), env: appEnv(), events });
    try {
      await second.memory.search({ location: { channelId: 'c1' }, query: 'boiler code', limit: 3 });
    } finally {
      await second.close();
    }
    assert.ok(seen.some((type) => type.startsWith('memory_')), `memory events reach the app's stream: ${seen.join(', ')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('replay --json: every compaction event carries the operator numbers (usage, tokens freed, duration)', () => {
  const dir = tempDir();
  try {
    writeFileSync(path.join(dir, 't.jsonl'), transcript(300));
    const result = run(['replay', 't.jsonl', '--data-dir', path.join(dir, 'data'), '--context-window', '2000', '--worker-lag', '30', '--json'], dir);
    assert.equal(result.status, 0, result.stderr);
    const events = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const byType = (type: string) => events.filter((event) => event.type === type);
    assert.ok(byType('emergency_truncation').length > 0, 'the lag forces emergencies');
    for (const event of byType('emergency_truncation')) {
      for (const key of ['channel_id', 'messages_dropped', 'tokens_freed', 'usage_before', 'usage_after', 'duration_ms']) {
        assert.notEqual(event[key], undefined, `emergency_truncation.${key}`);
      }
    }
    for (const event of byType('compaction_triggered')) assert.equal(typeof event.usage, 'number');
    for (const event of byType('compaction_completed')) {
      for (const key of ['messages_compacted', 'tokens_freed', 'duration_ms']) assert.equal(typeof event[key], 'number', key);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('replay takes a transcript saved with a byte-order mark and CRLF line ends', () => {
  const dir = tempDir();
  try {
    const lines = [
      { id: 'a', channel: 'c', author: 'x', content: 'hi' },
      { id: 'b', channel: 'c', author: 'x', content: 'yo' },
    ].map((line) => JSON.stringify(line));
    writeFileSync(path.join(dir, 't.jsonl'), `\uFEFF${lines.join('\r\n')}\r\n`);
    const result = run(['replay', 't.jsonl', '--data-dir', path.join(dir, 'data'), '--json'], dir);
    assert.equal(result.status, 0, result.stderr);
    const summary = JSON.parse(result.stdout.trim().split('\n').at(-1)!);
    assert.equal(summary.messages, 2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('replay: an emergency truncation never leaves the context larger than before (tokens_freed > 0)', () => {
  const dir = tempDir();
  try {
    const lines = [];
    for (let index = 0; index < 5; index += 1) lines.push({ id: `s${index}`, channel: 'c1', author: 'a', content: `small ${index}` });
    // Two pastes, each larger than one message may cost (they are carried cut to that cap), together
    // over the emergency threshold.
    lines.push({ id: 'big', channel: 'c1', author: 'a', content: 'word '.repeat(2_000) });
    lines.push({ id: 'big2', channel: 'c1', author: 'a', content: 'text '.repeat(2_000) });
    for (let index = 5; index < 10; index += 1) lines.push({ id: `s${index}`, channel: 'c1', author: 'a', content: `small ${index}` });
    writeFileSync(path.join(dir, 't.jsonl'), lines.map((line) => JSON.stringify(line)).join('\n'));
    const result = run(['replay', 't.jsonl', '--data-dir', path.join(dir, 'data'), '--context-window', '2000', '--json'], dir);
    assert.equal(result.status, 0, result.stderr);
    const truncations = result.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, number | string>)
      .filter((event) => event.type === 'emergency_truncation');
    assert.ok(truncations.length > 0, result.stdout);
    for (const event of truncations) {
      assert.ok(Number(event.tokens_freed) > 0, `frees room: ${JSON.stringify(event)}`);
      assert.ok(Number(event.usage_after) < Number(event.usage_before));
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
