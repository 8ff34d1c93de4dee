import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { STREAM_BROKEN_NOTE } from '../src/app/channel-responder.js';
import { startFakeAnthropic, type FakeAnthropic } from './fakes/fake-anthropic.js';
import { runMagpie } from './support/magpie-process.js';
import { makePng } from './support/images.js';

interface Block {
  type: string;
  text?: string;
  source?: { data: string; media_type: string };
}

function isAgent(body: { tools?: Array<{ name: string }> }): boolean {
  return (body.tools ?? []).some((tool) => tool.name === 'memory_search');
}

async function chat(model: FakeAnthropic, dir: string, input: string, extraConfig = '') {
  const configFile = path.join(dir, 'config.toml');
  writeFileSync(
    configFile,
    `[defaults]\n${extraConfig}\n[llm]\nmodel = "claude-test"\nbase_url = "${model.baseUrl}"\nmax_retries = 0\n\n[memory]\ndata_dir = "${path.join(dir, 'data')}"\n`,
  );
  const env = { PATH: process.env.PATH, HOME: dir, USER: 'tester' };
  return runMagpie(['chat', '--channel', 'files', '--config', configFile], { cwd: dir, env, input });
}

test('magpie chat streams the answer as it arrives and sends /attach files to the model (real process)', async () => {
  const model = await startFakeAnthropic();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-chat-stream-'));
  try {
    const png = makePng(300, 250);
    writeFileSync(path.join(dir, 'shot.png'), png);
    writeFileSync(path.join(dir, 'todo list.md'), '- buy milk\n- call the plumber\n');
    mkdirSync(path.join(dir, 'folder'));
    model.setDefault((request) => (isAgent(request.body) ? { text: 'Streamed answer in four pieces.', chunks: ['Streamed ', 'answer ', 'in four ', 'pieces.'], chunkDelayMs: 10 } : { text: 'summary' }));
    const run = await chat(
      model,
      dir,
      [
        'hello there',
        '/attach shot.png what is in this screenshot?',
        '/attach "todo list.md"',
        '/attach',
        '/attach missing.png look',
        '/attach folder',
        '/persona set You are terse.',
        '/persona',
        '/memory mine',
        '/quit',
        '',
      ].join('\n'),
    );
    assert.equal(run.code, 0, run.stderr);
    const answers = run.stdout.split('\n').filter((line) => line.startsWith('magpie: '));
    assert.deepEqual(answers, ['magpie: Streamed answer in four pieces.', 'magpie: Streamed answer in four pieces.', 'magpie: Streamed answer in four pieces.']);
    const agentRequests = model.requests.filter((request) => isAgent(request.body));
    assert.equal(agentRequests.length, 3);
    assert.ok(agentRequests.every((request) => request.body.stream === true));

    const imageTurn = agentRequests[1]!.body.messages.at(-1).content as Block[];
    const image = imageTurn.find((block) => block.type === 'image');
    assert.equal(image?.source?.media_type, 'image/png');
    assert.equal(image?.source?.data, png.toString('base64'));
    assert.ok(imageTurn.some((block) => block.text?.includes('what is in this screenshot?') && block.text.includes('[image: shot.png, 300×250')));
    assert.match(run.stderr, /attached shot\.png: the model sees it, about 100 tokens/);

    const textTurn = agentRequests[2]!.body.messages.at(-1).content as Block[];
    assert.ok(textTurn.some((block) => block.text === 'Attached file todo list.md:\n- buy milk\n- call the plumber\n'));

    assert.match(run.stderr, /Usage: \/attach PATH/);
    assert.match(run.stderr, /cannot attach missing\.png: ENOENT/);
    assert.match(run.stderr, /cannot attach folder: not a file/);
    assert.match(run.stdout, /Persona set for this channel/);
    assert.match(run.stdout, /persona \(set with \/persona by <@console-user>[^\n]*\nYou are terse\./);
    assert.match(run.stdout, /I remember nothing drawn only from your messages/);
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('magpie chat: a stream that breaks ends the printed line with the note; stream_replies = false prints whole answers', async () => {
  const model = await startFakeAnthropic();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'magpie-chat-stream-'));
  try {
    model.enqueue({ text: 'Half of an answer that', chunks: ['Half of ', 'an answer that'], chunkDelayMs: 20, breakAfter: 1 });
    const broken = await chat(model, dir, 'tell me\n/quit\n');
    assert.equal(broken.code, 0, broken.stderr);
    assert.match(broken.stdout, new RegExp(`magpie: Half of\\n${STREAM_BROKEN_NOTE.replace(/[()*]/g, '\\$&')}\\n`));
    assert.doesNotMatch(broken.stdout, /Sorry, I could not/);

    model.reset();
    model.setDefault((request) => (isAgent(request.body) ? { text: 'Whole answer.' } : { text: 'summary' }));
    const plain = await chat(model, dir, 'again\n/quit\n', 'stream_replies = false');
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(plain.stdout, /magpie: Whole answer\.\n/);
    assert.equal(model.requests.find((request) => isAgent(request.body))!.body.stream, undefined);
  } finally {
    await model.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
