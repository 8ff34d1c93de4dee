import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startFakeAnthropic } from './fakes/fake-anthropic.js';
import { MAGPIE_MAIN, magpieEnv, type MagpieRun, runMagpie } from './support/magpie-process.js';

function runCli(args: string[], options: { input?: string; env?: NodeJS.ProcessEnv; cwd: string }): Promise<MagpieRun> {
  const env = { PATH: process.env.PATH, HOME: options.cwd, USER: 'tester', ...options.env };
  return runMagpie(args, { cwd: options.cwd, env, ...(options.input === undefined ? {} : { input: options.input }) });
}

function tempDir(): string {
  return mkdtempSync(path.join(os.tmpdir(), 'magpie-chat-'));
}

test('magpie chat answers through the model and /context works (piped stdin, real process)', async () => {
  const model = await startFakeAnthropic();
  const dir = tempDir();
  try {
    model.setDefault((request) => {
      const hasSearch = (request.body.tools ?? []).some((tool: { name: string }) => tool.name === 'memory_search');
      return hasSearch ? { text: 'Hello from the fake model!' } : { text: 'summary' };
    });
    const configFile = path.join(dir, 'config.toml');
    writeFileSync(
      configFile,
      `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n\n[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`,
    );
    const run = await runCli(['chat', '--channel', 'demo', '--config', configFile], {
      cwd: dir,
      input: 'hi magpie, I like gooseberries\n/context\n/memory search gooseberries\n/quit\n',
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /magpie: Hello from the fake model!/);
    assert.match(run.stdout, /Context: .*% of 200,000 tokens/);
    assert.match(run.stdout, /Live messages: 2/);
    assert.match(run.stdout, /gooseberries/);
    assert.match(run.stderr, /console:demo/);
    const agentRequest = model.requests.find((request) => JSON.stringify(request.body.messages).includes('gooseberries'));
    assert.ok(agentRequest, 'the model saw the message');
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie chat without a model says how to configure one and still records', async () => {
  const dir = tempDir();
  try {
    const run = await runCli(['chat', '--data-dir', path.join(dir, 'data')], {
      cwd: dir,
      input: 'remember that the boiler code is 4471\n/memory search boiler code\n/context\n/compact\n/memory forget nope\n/memory forget msg-1\n/memory search boiler code\n',
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /ANTHROPIC_API_KEY/);
    assert.match(run.stderr, /base_url/);
    assert.match(run.stdout, /boiler code is 4471/);
    assert.match(run.stdout, /Live messages: 1/);
    assert.doesNotMatch(run.stdout, /magpie:/);
    // One message cannot be split: /compact says so rather than claiming a compaction started.
    assert.match(run.stdout, /Nothing to compact yet/);
    assert.doesNotMatch(run.stdout, /Compaction started/);
    assert.match(run.stdout, /No memory with id nope/);
    assert.match(run.stdout, /Forgot archived message msg-1\./);
    assert.equal(run.stdout.match(/boiler code is 4471/g)?.length, 1, 'forgotten: the second search no longer finds it');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie chat /compact reports what happened: a compaction that cannot free room is not "started"', async () => {
  const dir = tempDir();
  try {
    const short = Array.from({ length: 6 }, (_, index) => `note ${index + 1}: code ALPHA-${index + 1}`).join('\n');
    const long = Array.from({ length: 12 }, (_, index) => `note ${index + 1}: the launch code is ALPHA-${index + 1} and Bob owns it`).join('\n');
    const tooShort = await runCli(['chat', '--data-dir', path.join(dir, 'short')], { cwd: dir, input: `${short}\n/compact\n/context\n` });
    assert.equal(tooShort.code, 0, tooShort.stderr);
    assert.match(tooShort.stdout, /Compaction did not apply \(the summary would not be shorter/);
    assert.match(tooShort.stderr, /a compaction did not apply: no_gain/);
    assert.match(tooShort.stdout, /summaries: 0/);
    const enough = await runCli(['chat', '--data-dir', path.join(dir, 'long')], { cwd: dir, input: `${long}\n/compact\n/context\n` });
    assert.equal(enough.code, 0, enough.stderr);
    assert.doesNotMatch(enough.stdout, /did not apply/);
    assert.match(enough.stdout, /Compacted the oldest \d+ messages into a summary\.|Compaction started on the oldest (\d+ of the )?12 live messages/);
    assert.match(enough.stdout, /summaries: 1|a compaction is running now/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie chat tells the terminal user why the model did not answer (a rejected key)', async () => {
  const model = await startFakeAnthropic();
  const dir = tempDir();
  try {
    model.setDefault({ status: 401, message: 'invalid x-api-key' });
    const configFile = path.join(dir, 'config.toml');
    writeFileSync(configFile, `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n`);
    const run = await runCli(['chat', '--config', configFile, '--data-dir', path.join(dir, 'data')], { cwd: dir, input: 'hello\n' });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /magpie: Sorry/);
    assert.match(run.stderr, /the model call failed: .*(401|invalid x-api-key|authentication)/i);
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  test(`${signal === 'SIGINT' ? 'Ctrl-C' : 'SIGTERM'} in magpie chat cancels a slow reply, says which typed lines were not sent, and leaves cleanly (exit 0)`, async () => {
    const model = await startFakeAnthropic();
    const dir = tempDir();
    try {
      model.setDefault({ delayMs: 60_000, then: { text: 'too late' } });
      const configFile = path.join(dir, 'config.toml');
      writeFileSync(configFile, `[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n`);
      const args = ['chat', '--config', configFile, '--data-dir', path.join(dir, 'data')];
      const child = spawn(process.execPath, [MAGPIE_MAIN, ...args], {
        cwd: dir,
        env: magpieEnv(args, { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, USER: 'tester' } }),
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.stderr.on('data', (chunk) => (stderr += chunk));
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      child.stdin.write('think about this for a long time\n');
      const deadline = Date.now() + 15_000;
      while (model.requests.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(model.requests.length, 1, 'the reply is with the model');
      // Typed while the reply is being thought about: read, waiting their turn.
      child.stdin.write('and this too\nand one more thing\n');
      await new Promise((resolve) => setTimeout(resolve, 300));
      child.kill(signal);
      assert.equal(await exited, 0, stderr);
      assert.match(stderr, /leaving/);
      assert.match(stderr, /2 lines typed after the last one handled were not sent/);
      assert.equal(model.requests.length, 1, 'the waiting lines were not answered');
      assert.doesNotMatch(stdout, /too late/);
      assert.doesNotMatch(stderr, /\n\s+at /);
      // The data dir was closed cleanly: the line that was handled is stored and searchable, the others are not.
      const search = await runCli(['memory', 'search', 'long time', '--channel', 'console:local', '--data-dir', path.join(dir, 'data'), '--config', configFile], { cwd: dir });
      assert.equal(search.code, 0, search.stderr);
      assert.match(search.stdout, /think about this for a long time/);
      const unsent = await runCli(['memory', 'search', 'one more thing', '--channel', 'console:local', '--data-dir', path.join(dir, 'data'), '--config', configFile], { cwd: dir });
      assert.doesNotMatch(unsent.stdout, /and one more thing/);
    } finally {
      await model.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('magpie chat with a model named but no key says the key is missing, not that no model is configured', async () => {
  const dir = tempDir();
  try {
    const configFile = path.join(dir, 'config.toml');
    writeFileSync(configFile, '[llm]\nmodel = "claude-test"\n');
    const run = await runCli(['chat', '--config', configFile, '--data-dir', path.join(dir, 'data')], { cwd: dir, input: 'hi\n' });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /The model claude-test cannot be used/);
    assert.match(run.stderr, /ANTHROPIC_API_KEY is not set/);
    assert.doesNotMatch(run.stderr, /No model is configured/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie chat refuses unknown flags with usage', async () => {
  const dir = tempDir();
  try {
    const run = await runCli(['chat', '--bogus'], { cwd: dir });
    assert.equal(run.code, 2);
    assert.match(run.stderr, /Usage: magpie chat/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
