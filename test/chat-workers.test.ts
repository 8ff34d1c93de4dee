import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeAnthropic, type FakeReply, type RecordedRequest } from './fakes/fake-anthropic.js';
import { spawn } from 'node:child_process';
import { isBranchRequest, isWorkerRequest, waitFor } from './branch-worker-support.js';
import { MAGPIE_MAIN, runMagpie } from './support/magpie-process.js';
import { storageEnv } from './support/storage.js';

function lastToolResult(request: RecordedRequest): string | undefined {
  const last = request.body.messages.at(-1) as { content: string | Array<{ type: string; content?: string }> };
  return typeof last.content === 'string' ? undefined : last.content.find((block) => block.type === 'tool_result')?.content;
}

test('magpie chat: a worker reports back in the terminal, /tasks lists it, and branch answers come through (real process)', async () => {
  const model = await startFakeAnthropic();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-chat-workers-'));
  try {
    let releaseWorker: (() => void) | undefined;
    model.setDefault((request): FakeReply | Promise<FakeReply> => {
      if (isWorkerRequest(request)) {
        // Held until the user's third line, so /tasks is sure to see the worker running.
        return new Promise<FakeReply>((resolve) => {
          releaseWorker = () => resolve({ text: 'The plum tree was planted in 2019.' });
        });
      }
      if (isBranchRequest(request)) return { text: 'Memory says: plums, 2019.' };
      const text = JSON.stringify(request.body.messages.at(-1));
      const result = lastToolResult(request);
      if (result !== undefined) return { text: `Tool said: ${result}` };
      if (text.includes('research the plum tree')) return { toolUse: [{ name: 'spawn_worker', input: { task: 'Find when the plum tree was planted.' } }] };
      if (text.includes('think about it')) return { toolUse: [{ name: 'branch', input: { question: 'When was the plum tree planted?' } }] };
      releaseWorker?.();
      return { text: 'Still here.' };
    });
    const configFile = path.join(dir, 'config.toml');
    writeFileSync(configFile, `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n\n[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`);
    const run = await runMagpie(['chat', '--channel', 'garden', '--config', configFile], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
      input: 'please research the plum tree\n/tasks\nthink about it\nhow is it going?\n/tasks cancel w-00000000\n/tasks cancel\n',
    });
    assert.equal(run.code, 0, run.stderr);
    const workerId = /"worker_id":"(w-[0-9a-f]{8})"/.exec(run.stdout)?.[1];
    assert.ok(workerId, run.stdout);
    assert.match(run.stdout, /magpie: Tool said: \{"worker_id":"w-[0-9a-f]{8}","status":"started"\}/);
    assert.match(run.stdout, new RegExp(`Running workers \\(1\\):\\n${workerId} · started \\d+ s ago · segment 1 · 0 tokens · “Find when the plum tree was planted\\.”`));
    assert.match(run.stdout, /magpie: Tool said: Memory says: plums, 2019\./);
    assert.match(run.stdout, /No running worker with id w-00000000 in this channel\./);
    assert.match(run.stdout, /Which worker\? Give its id/);
    assert.match(run.stdout, new RegExp(`magpie: \\[worker ${workerId} report\\] Task “Find when the plum tree was planted\\.”:\\nThe plum tree was planted in 2019\\.`));
    assert.match(run.stderr, new RegExp(`worker ${workerId} started in the background`));
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a worker running when magpie chat is killed (-9) is reported as interrupted at the next start', async () => {
  const model = await startFakeAnthropic();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-chat-kill-'));
  try {
    model.setDefault((request): FakeReply => {
      // The worker never hears back before the kill.
      if (isWorkerRequest(request)) return { delayMs: 120_000, then: { text: 'never' } };
      const result = lastToolResult(request);
      if (result !== undefined) return { text: 'Started it.' };
      return { toolUse: [{ name: 'spawn_worker', input: { task: 'Index every recipe.' } }] };
    });
    const dataDir = path.join(dir, 'data');
    const configFile = path.join(dir, 'config.toml');
    writeFileSync(configFile, `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n\n[memory]\ndata_dir = "${dataDir}"\n`);
    const child = spawn(process.execPath, [MAGPIE_MAIN, 'chat', '--channel', 'kitchen', '--config', configFile], {
      cwd: dir,
      // The store runMagpie gives the restart below (its working directory's).
      env: { PATH: process.env.PATH, HOME: dir, ...storageEnv(dir) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
    child.stdin.write('please index the recipes\n');
    await waitFor(() => stdout.includes('magpie: Started it.') && model.inFlight > 0, 'the worker to be running', 30_000);
    child.kill('SIGKILL');
    await exited;

    const run = await runMagpie(['chat', '--channel', 'kitchen', '--config', configFile], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
      input: '/tasks\n/memory search interrupted recipe\n',
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /No workers are running in this channel\./);
    assert.match(run.stdout, /\[worker w-[0-9a-f]{8} interrupted\] The background task “Index every recipe\.” was interrupted/);
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
