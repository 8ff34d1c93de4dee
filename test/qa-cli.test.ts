import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

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
  return spawnSync(process.execPath, [MAIN, ...args], { cwd, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: cwd } });
}

test('replay --json | head: a reader that leaves early does not crash the replay, which still completes', async () => {
  const dir = tempDir();
  try {
    writeFileSync(path.join(dir, 't.jsonl'), transcript(200));
    const dataDir = path.join(dir, 'data');
    const child = spawn(process.execPath, [MAIN, 'replay', 't.jsonl', '--data-dir', dataDir, '--context-window', '1500', '--json'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
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
    const again = run(['replay', 't.jsonl', '--data-dir', dataDir, '--context-window', '1500', '--json'], dir);
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
      assert.match(result.stderr, /^magpie replay: E[A-Z]+: .*a-file/);
      assert.doesNotMatch(result.stderr, /unexpected error|\n\s+at /);
    }
    const chat = spawnSync(process.execPath, [MAIN, 'chat', '--data-dir', 'a-file'], { cwd: dir, encoding: 'utf8', input: 'hello\n' });
    assert.equal(chat.status, 1, chat.stderr);
    assert.match(chat.stderr, /^magpie chat: E[A-Z]+: .*a-file/);
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
    const lines = Array.from({ length: 60 }, (_, index) =>
      JSON.stringify({ id: `m${index}`, channel: 'c1', author: 'ana', content: `Point ${index}: ${'we keep talking about numbers. '.repeat(3)}`, ts: start + index * 60_000 }),
    );
    writeFileSync(path.join(dir, 't.jsonl'), lines.join('\n'));
    writeFileSync(path.join(dir, 'config.toml'), `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n`);
    const dataDir = path.join(dir, 'data');
    const child = spawn(process.execPath, [MAIN, 'replay', 't.jsonl', '--data-dir', dataDir, '--summarizer', 'llm', '--context-window', '1500', '--json'], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
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
      assert.ok(at >= start && at <= start + 60 * 60_000, `created_at ${result.created_at} is a transcript time`);
    }
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
